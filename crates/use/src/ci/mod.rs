//! The release pipeline's generated files: the GitHub Actions workflow (from the catalog and
//! runners.toml) and the Nix overlay export.

pub mod discover;
pub mod github;
pub mod nix;
pub mod runners;

/// A unified diff of two texts (3 lines of context), empty when they are equal.
pub fn unified_diff(old: &str, new: &str, old_name: &str, new_name: &str) -> String {
    if old == new {
        return String::new();
    }
    let a: Vec<&str> = old.lines().collect();
    let b: Vec<&str> = new.lines().collect();
    let ops = diff_ops(&a, &b);
    const CONTEXT: usize = 3;
    let mut out = format!("--- {old_name}\n+++ {new_name}\n");
    // Group the operations into hunks around the changes.
    let changed: Vec<usize> = ops
        .iter()
        .enumerate()
        .filter(|(_, o)| !matches!(o, Op::Same(..)))
        .map(|(i, _)| i)
        .collect();
    let mut i = 0;
    while i < changed.len() {
        let start = changed[i].saturating_sub(CONTEXT);
        let mut end = changed[i];
        while i < changed.len() && changed[i] <= end + 2 * CONTEXT {
            end = changed[i];
            i += 1;
        }
        let end = (end + CONTEXT + 1).min(ops.len());
        let (mut a0, mut b0) = (0, 0);
        for o in &ops[..start] {
            match o {
                Op::Same(..) => {
                    a0 += 1;
                    b0 += 1;
                }
                Op::Del(_) => a0 += 1,
                Op::Add(_) => b0 += 1,
            }
        }
        let hunk = &ops[start..end];
        let alen = hunk.iter().filter(|o| !matches!(o, Op::Add(_))).count();
        let blen = hunk.iter().filter(|o| !matches!(o, Op::Del(_))).count();
        out += &format!(
            "@@ -{},{alen} +{},{blen} @@\n",
            a0 + usize::from(alen > 0),
            b0 + usize::from(blen > 0)
        );
        for o in hunk {
            match o {
                Op::Same(l) => out += &format!(" {l}\n"),
                Op::Del(l) => out += &format!("-{l}\n"),
                Op::Add(l) => out += &format!("+{l}\n"),
            }
        }
    }
    if ops.iter().all(|o| matches!(o, Op::Same(..))) {
        // Only a trailing newline differs.
        out += "\\ the files differ only in their final newline\n";
    }
    out
}

enum Op<'a> {
    Same(&'a str),
    Del(&'a str),
    Add(&'a str),
}

/// Line operations turning `a` into `b`: a longest common subsequence, after trimming the
/// common prefix and suffix. Inputs too large for the table become one replacement.
fn diff_ops<'a>(a: &[&'a str], b: &[&'a str]) -> Vec<Op<'a>> {
    let pre = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    let suf = a[pre..]
        .iter()
        .rev()
        .zip(b[pre..].iter().rev())
        .take_while(|(x, y)| x == y)
        .count();
    let (ma, mb) = (&a[pre..a.len() - suf], &b[pre..b.len() - suf]);
    let mut ops: Vec<Op> = a[..pre].iter().map(|l| Op::Same(l)).collect();
    if ma.len().saturating_mul(mb.len()) > 16_000_000 {
        ops.extend(ma.iter().map(|l| Op::Del(l)));
        ops.extend(mb.iter().map(|l| Op::Add(l)));
    } else {
        let (n, m) = (ma.len(), mb.len());
        // lcs[i][j]: LCS length of ma[i..] and mb[j..].
        let mut lcs = vec![0u32; (n + 1) * (m + 1)];
        let at = |i: usize, j: usize| i * (m + 1) + j;
        for i in (0..n).rev() {
            for j in (0..m).rev() {
                lcs[at(i, j)] = if ma[i] == mb[j] {
                    lcs[at(i + 1, j + 1)] + 1
                } else {
                    lcs[at(i + 1, j)].max(lcs[at(i, j + 1)])
                };
            }
        }
        let (mut i, mut j) = (0, 0);
        while i < n || j < m {
            if i < n && j < m && ma[i] == mb[j] {
                ops.push(Op::Same(ma[i]));
                i += 1;
                j += 1;
            } else if i < n && (j == m || lcs[at(i + 1, j)] >= lcs[at(i, j + 1)]) {
                ops.push(Op::Del(ma[i]));
                i += 1;
            } else {
                ops.push(Op::Add(mb[j]));
                j += 1;
            }
        }
    }
    ops.extend(a[a.len() - suf..].iter().map(|l| Op::Same(l)));
    ops
}

#[cfg(test)]
mod tests {
    use super::unified_diff;

    #[test]
    fn diff_shows_changed_lines_with_context() {
        let old = "a\nb\nc\nd\ne\nf\ng\nh\ni\n";
        let new = "a\nb\nc\nd\nE\nf\ng\nh\ni\nj\n";
        let d = unified_diff(old, new, "committed", "generated");
        assert_eq!(
            d,
            "--- committed\n+++ generated\n@@ -2,8 +2,9 @@\n b\n c\n d\n-e\n+E\n f\n g\n h\n i\n+j\n"
        );
        assert_eq!(unified_diff(old, old, "x", "y"), "");
        let d = unified_diff("", "x\n", "a", "b");
        assert!(d.contains("@@ -0,0 +1,1 @@\n+x\n"), "{d}");
        let d = unified_diff("x", "x\n", "a", "b");
        assert!(d.contains("final newline"), "{d}");
    }
}
