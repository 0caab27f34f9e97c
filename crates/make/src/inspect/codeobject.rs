//! AMDGPU code objects: the ELF header fields that say which GPU a code object runs on.
//!
//! Values from LLVM's `llvm/include/llvm/BinaryFormat/ELF.h` (EF_AMDGPU_MACH_*, the
//! EF_AMDGPU_FEATURE_*_V4 masks, ELFABIVERSION_AMDGPU_HSA_*) and AMDGPUUsage's machine and
//! generic-processor tables.

use serde::Serialize;

use crate::arch::TargetId;

pub const EM_AMDGPU: u16 = 224;
const ELFOSABI_AMDGPU_HSA: u8 = 64;
const EF_AMDGPU_MACH: u32 = 0x0ff;
const EF_AMDGPU_FEATURE_XNACK_V3: u32 = 0x100;
const EF_AMDGPU_FEATURE_SRAMECC_V3: u32 = 0x200;
const EF_AMDGPU_FEATURE_XNACK_V4: u32 = 0x300;
const EF_AMDGPU_FEATURE_SRAMECC_V4: u32 = 0xc00;
const EF_AMDGPU_GENERIC_VERSION_OFFSET: u32 = 24;

/// EF_AMDGPU_MACH_* values and the processor each names: the R600 ones (no ROCm code object
/// names them, but a file may) and every AMDGCN one, including those newer LLVM removed
/// (gfx940, gfx941) or added after gfx12 (gfx1250, gfx1310, gfx117x and their generics).
const MACHS: &[(u32, &str)] = &[
    (0x001, "r600"),
    (0x002, "r630"),
    (0x003, "rs880"),
    (0x004, "rv670"),
    (0x005, "rv710"),
    (0x006, "rv730"),
    (0x007, "rv770"),
    (0x008, "cedar"),
    (0x009, "cypress"),
    (0x00a, "juniper"),
    (0x00b, "redwood"),
    (0x00c, "sumo"),
    (0x00d, "barts"),
    (0x00e, "caicos"),
    (0x00f, "cayman"),
    (0x010, "turks"),
    (0x020, "gfx600"),
    (0x021, "gfx601"),
    (0x022, "gfx700"),
    (0x023, "gfx701"),
    (0x024, "gfx702"),
    (0x025, "gfx703"),
    (0x026, "gfx704"),
    (0x028, "gfx801"),
    (0x029, "gfx802"),
    (0x02a, "gfx803"),
    (0x02b, "gfx810"),
    (0x02c, "gfx900"),
    (0x02d, "gfx902"),
    (0x02e, "gfx904"),
    (0x02f, "gfx906"),
    (0x030, "gfx908"),
    (0x031, "gfx909"),
    (0x032, "gfx90c"),
    (0x033, "gfx1010"),
    (0x034, "gfx1011"),
    (0x035, "gfx1012"),
    (0x036, "gfx1030"),
    (0x037, "gfx1031"),
    (0x038, "gfx1032"),
    (0x039, "gfx1033"),
    (0x03a, "gfx602"),
    (0x03b, "gfx705"),
    (0x03c, "gfx805"),
    (0x03d, "gfx1035"),
    (0x03e, "gfx1034"),
    (0x03f, "gfx90a"),
    (0x040, "gfx940"),
    (0x041, "gfx1100"),
    (0x042, "gfx1013"),
    (0x043, "gfx1150"),
    (0x044, "gfx1103"),
    (0x045, "gfx1036"),
    (0x046, "gfx1101"),
    (0x047, "gfx1102"),
    (0x048, "gfx1200"),
    (0x049, "gfx1250"),
    (0x04a, "gfx1151"),
    (0x04b, "gfx941"),
    (0x04c, "gfx942"),
    (0x04e, "gfx1201"),
    (0x04f, "gfx950"),
    (0x050, "gfx1310"),
    (0x051, "gfx9-generic"),
    (0x052, "gfx10-1-generic"),
    (0x053, "gfx10-3-generic"),
    (0x054, "gfx11-generic"),
    (0x055, "gfx1152"),
    (0x057, "gfx1154"),
    (0x058, "gfx1153"),
    (0x059, "gfx12-generic"),
    (0x05a, "gfx1251"),
    (0x05b, "gfx12-5-generic"),
    (0x05c, "gfx1172"),
    (0x05d, "gfx1170"),
    (0x05e, "gfx1171"),
    (0x05f, "gfx9-4-generic"),
    (0x062, "gfx11-7-generic"),
    (0x063, "gfx13-generic"),
];

/// AMDGPUUsage "AMDGPU Generic Processors": the processors a generic target's code runs on.
const GENERIC_MEMBERS: &[(&str, &[&str])] = &[
    (
        "gfx9-generic",
        &["gfx900", "gfx902", "gfx904", "gfx906", "gfx909", "gfx90c"],
    ),
    ("gfx9-4-generic", &["gfx940", "gfx941", "gfx942", "gfx950"]),
    (
        "gfx10-1-generic",
        &["gfx1010", "gfx1011", "gfx1012", "gfx1013"],
    ),
    (
        "gfx10-3-generic",
        &[
            "gfx1030", "gfx1031", "gfx1032", "gfx1033", "gfx1034", "gfx1035", "gfx1036",
        ],
    ),
    (
        "gfx11-generic",
        &[
            "gfx1100", "gfx1101", "gfx1102", "gfx1103", "gfx1150", "gfx1151", "gfx1152", "gfx1153",
        ],
    ),
    ("gfx12-generic", &["gfx1200", "gfx1201"]),
];

pub fn mach_name(mach: u32) -> Option<&'static str> {
    MACHS.iter().find(|(m, _)| *m == mach).map(|(_, n)| *n)
}

pub fn mach_of(processor: &str) -> Option<u32> {
    MACHS.iter().find(|(_, n)| *n == processor).map(|(m, _)| *m)
}

/// The processors a generic target covers; `None` for a processor that is not generic.
pub fn generic_members(processor: &str) -> Option<&'static [&'static str]> {
    GENERIC_MEMBERS
        .iter()
        .find(|(g, _)| *g == processor)
        .map(|(_, m)| *m)
}

/// A target feature as a code object records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Feature {
    /// The processor has no such feature (or the code object version cannot say).
    Unsupported,
    /// Runs with the feature on or off.
    Any,
    Off,
    On,
}

impl Feature {
    fn v4(bits: u32) -> Feature {
        match bits & 3 {
            0 => Feature::Unsupported,
            1 => Feature::Any,
            2 => Feature::Off,
            _ => Feature::On,
        }
    }

    /// As a target ID setting: `None` is "any" (or not applicable).
    pub fn setting(self) -> Option<bool> {
        match self {
            Feature::Unsupported | Feature::Any => None,
            Feature::Off => Some(false),
            Feature::On => Some(true),
        }
    }
}

/// What the ELF header of one AMDGPU code object says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct CodeObject {
    /// EF_AMDGPU_MACH (the low byte of e_flags).
    pub mach: u32,
    /// The processor that mach names, or `unknown-0xNN`.
    pub processor: String,
    pub xnack: Feature,
    pub sramecc: Feature,
    /// Code object version (2..6), from e_ident[EI_ABIVERSION]; `None` if not an HSA object.
    pub version: Option<u8>,
    /// Generic code object version (e_flags bits 24..31), for generic processors.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub generic_version: Option<u8>,
    /// The target ID this code object satisfies exactly.
    pub target: TargetId,
}

/// True for a little-endian ELF64 AMDGPU header.
pub fn is_amdgpu_elf(data: &[u8]) -> bool {
    data.len() >= 64
        && data.starts_with(b"\x7fELF")
        && data[4] == 2
        && data[5] == 1
        && u16::from_le_bytes([data[18], data[19]]) == EM_AMDGPU
}

/// Decodes an AMDGPU code object's ELF header; `Err` says what is wrong with it.
pub fn parse(data: &[u8]) -> Result<CodeObject, String> {
    if data.len() < 64 {
        return Err(format!(
            "code object of {} bytes is shorter than an ELF64 header",
            data.len()
        ));
    }
    if !data.starts_with(b"\x7fELF") {
        return Err("code object does not start with the ELF magic".into());
    }
    if data[4] != 2 || data[5] != 1 {
        return Err("code object is not a little-endian ELF64 file".into());
    }
    let machine = u16::from_le_bytes([data[18], data[19]]);
    if machine != EM_AMDGPU {
        return Err(format!(
            "ELF machine {machine} is not EM_AMDGPU ({EM_AMDGPU})"
        ));
    }
    let flags = u32::from_le_bytes([data[48], data[49], data[50], data[51]]);
    Ok(decode(data[7], data[8], flags))
}

/// Decodes e_ident[EI_OSABI], e_ident[EI_ABIVERSION] and e_flags.
pub fn decode(osabi: u8, abi_version: u8, flags: u32) -> CodeObject {
    let mach = flags & EF_AMDGPU_MACH;
    let processor = mach_name(mach).map_or_else(|| format!("unknown-{mach:#04x}"), str::to_string);
    // ELFABIVERSION_AMDGPU_HSA_V2 = 0 ... V6 = 4.
    // Only add after the range check: an ABI version of 254 or 255 must not overflow.
    let version = match (osabi, abi_version) {
        (ELFOSABI_AMDGPU_HSA, v @ 0..=4) => Some(v + 2),
        _ => None,
    };
    let (xnack, sramecc) = match version {
        Some(v) if v >= 4 => (
            Feature::v4((flags & EF_AMDGPU_FEATURE_XNACK_V4) >> 8),
            Feature::v4((flags & EF_AMDGPU_FEATURE_SRAMECC_V4) >> 10),
        ),
        // v3 has one bit per feature: set means on, clear means off or not supported.
        Some(3) => (
            if flags & EF_AMDGPU_FEATURE_XNACK_V3 != 0 {
                Feature::On
            } else {
                Feature::Unsupported
            },
            if flags & EF_AMDGPU_FEATURE_SRAMECC_V3 != 0 {
                Feature::On
            } else {
                Feature::Unsupported
            },
        ),
        _ => (Feature::Unsupported, Feature::Unsupported),
    };
    let generic_version = (generic_members(&processor).is_some() && version >= Some(6))
        .then_some((flags >> EF_AMDGPU_GENERIC_VERSION_OFFSET) as u8);
    let target = TargetId {
        arch: processor.clone(),
        sramecc: sramecc.setting(),
        xnack: xnack.setting(),
    };
    CodeObject {
        mach,
        processor,
        xnack,
        sramecc,
        version,
        generic_version,
        target,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shipped target table knows every processor a code object can name.
    #[test]
    fn the_shipped_table_knows_every_processor_the_code_objects_name() {
        use crate::diag::{Diagnostics, SourceFile};
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../recipes/arches.toml");
        let file = SourceFile::new(path, std::fs::read_to_string(path).unwrap());
        let mut d = Diagnostics::default();
        let table = crate::arch::ArchTable::parse(&file, &mut d);
        assert!(d.is_empty());
        // Every GCN processor and generic target of AMDGPUUsage up to gfx12 that an
        // EF_AMDGPU_MACH value names.
        for mach in 0x20..=0x5f {
            if let Some(name) = mach_name(mach)
                && ![
                    "gfx1154",
                    "gfx1170",
                    "gfx1171",
                    "gfx1172",
                    "gfx1251",
                    "gfx1310",
                    "gfx12-5-generic",
                ]
                .contains(&name)
            {
                assert!(
                    table.get(name).is_some(),
                    "{name} (mach {mach:#x}) is not in the table"
                );
            }
        }
    }

    #[test]
    fn e_flags_decode_like_llvm_readelf() {
        // gfx90c, v4 (ABI version 2), xnack any.
        let c = decode(64, 2, 0x132);
        assert_eq!(c.processor, "gfx90c");
        assert_eq!(c.version, Some(4));
        assert_eq!(c.xnack, Feature::Any);
        assert_eq!(c.target.to_string(), "gfx90c");
        // gfx902:xnack+, v5.
        let c = decode(64, 3, 0x32d);
        assert_eq!(c.target.to_string(), "gfx902:xnack+");
        assert_eq!(c.version, Some(5));
        // gfx906:sramecc-:xnack-
        let c = decode(64, 2, 0xa2f);
        assert_eq!(c.target.to_string(), "gfx906:sramecc-:xnack-");
        // gfx9-generic v6, generic version 1.
        let c = decode(64, 4, 0x0100_0151);
        assert_eq!(c.processor, "gfx9-generic");
        assert_eq!(c.generic_version, Some(1));
        assert_eq!(decode(64, 2, 0x77).processor, "unknown-0x77");
    }

    #[test]
    fn any_abi_version_decodes_without_overflow() {
        // Found by fuzzing (fuzz/, inspect_bytes): e_ident[EI_ABIVERSION] = 0xff overflowed.
        for abi in [5, 254, 255] {
            assert_eq!(decode(64, abi, 0x132).version, None);
        }
        let mut header = [0u8; 64];
        header[..4].copy_from_slice(b"\x7fELF");
        header[4..9].copy_from_slice(&[2, 1, 1, 64, 0xff]);
        header[18..20].copy_from_slice(&EM_AMDGPU.to_le_bytes());
        assert_eq!(parse(&header).unwrap().version, None);
    }

    #[test]
    fn every_table_target_has_a_mach() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../recipes/arches.toml");
        let file = crate::diag::SourceFile::new(path, std::fs::read_to_string(path).unwrap());
        let mut d = crate::diag::Diagnostics::default();
        let table = crate::arch::ArchTable::parse(&file, &mut d);
        assert!(d.is_empty());
        for t in table.names() {
            assert!(mach_of(t).is_some(), "{t} has no EF_AMDGPU_MACH value");
        }
        // Debian's libraries (gfx803 to gfx1102) decode; values from LLVM's ELF.h.
        for (t, m) in [
            ("gfx803", 0x2a),
            ("gfx900", 0x2c),
            ("gfx906", 0x2f),
            ("gfx908", 0x30),
            ("gfx90a", 0x3f),
            ("gfx90c", 0x32),
            ("gfx1010", 0x33),
            ("gfx1030", 0x36),
            ("gfx1035", 0x3d),
            ("gfx1100", 0x41),
            ("gfx1101", 0x46),
            ("gfx1102", 0x47),
            ("gfx942", 0x4c),
            ("gfx1201", 0x4e),
        ] {
            assert_eq!(mach_of(t), Some(m), "{t}");
            assert_eq!(mach_name(m), Some(t));
        }
        let mut seen = std::collections::BTreeSet::new();
        for (m, n) in MACHS {
            assert!(seen.insert(*m), "{m:#x} twice");
            assert_eq!(MACHS.iter().filter(|(_, x)| x == n).count(), 1, "{n} twice");
        }
        for (g, members) in GENERIC_MEMBERS {
            assert!(table.get(g).is_some_and(|a| a.is_generic()), "{g}");
            for m in *members {
                assert!(table.get(m).is_some(), "{g} member {m}");
            }
        }
    }
}
