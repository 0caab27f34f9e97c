//! `key rotate`: a signed key list that moves trust from the key that signs it to new keys,
//! and revokes keys.

use std::path::{Path, PathBuf};

use super::Result;
use crate::sign::{self, PublicKey};
use crate::trust;

/// What `key rotate` is asked.
pub struct RotateRequest<'a> {
    /// The secret key that signs the list (trusted today).
    pub old: &'a Path,
    /// The keys the list trusts (RW… or .pub files).
    pub new: &'a [String],
    /// Keys the list revokes (RW… or .pub files).
    pub revoke: &'a [String],
    /// Revoke the signing key itself too.
    pub revoke_old: bool,
    /// Where the key lists are written.
    pub out: &'a Path,
    /// The secret key's password, when it is encrypted.
    pub password: Option<String>,
}

/// The list written.
pub struct Rotated {
    /// Every file written (the numbered list and keys.json).
    pub files: Vec<PathBuf>,
    pub sequence: u64,
    /// The signing key's ID.
    pub signer: String,
    pub trusts: Vec<String>,
    pub revokes: Vec<String>,
}

pub fn rotate(req: &RotateRequest<'_>) -> Result<Rotated> {
    let sk = sign::load_secret(req.old, req.password.clone())?;
    let parse = |ks: &[String]| -> Result<Vec<PublicKey>> {
        Ok(ks
            .iter()
            .map(|k| sign::public_from_arg(k))
            .collect::<std::result::Result<_, _>>()?)
    };
    let new = parse(req.new)?;
    let mut revoked = parse(req.revoke)?;
    if req.revoke_old {
        revoked.push(sk.public().clone());
    }
    let r = trust::rotate(&sk, &new, &revoked, req.out)?;
    let ids = |ks: &[PublicKey]| ks.iter().map(|k| sign::key_id(k.keynum())).collect();
    Ok(Rotated {
        files: r.files,
        sequence: r.list.sequence,
        signer: sk.key_id(),
        trusts: ids(&new),
        revokes: ids(&revoked),
    })
}
