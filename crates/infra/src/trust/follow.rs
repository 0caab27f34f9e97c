//! Following a chain of key lists back to a trusted key, and forward again to the newest.

use std::collections::BTreeMap;

use crate::sign::{self, PublicKey, SignError};

use super::{
    Chain, Fetched, KeyList, ListSource, MAX_CHAIN, Previous, Resolved, Revocation, Seen, State,
    StateFile, TrustError, id, numbered_sequence, parse_list, sha256_hex,
};

/// One list of a chain, read and its signer known (not yet verified).
struct Link {
    what: String,
    list: KeyList,
    bytes: Vec<u8>,
    signature: String,
    signer: String,
}

/// The trusted keys: `roots` (built in, config, `--key`) extended by the key list `head` of
/// `source` (usually `keys.json`) and its chain, minus revoked keys; updates and saves `state`.
///
/// No list: the roots, minus the keys the state records as revoked. A list whose chain does
/// not reach a root key is not used (a note says so). Errors: a list that does not verify with
/// the key that should have signed it, a broken link, a list signed by a revoked key, a chain
/// longer than [`MAX_CHAIN`], and a replay (an older sequence than the state records for the
/// chain's root key, or another list under the same sequence).
pub fn resolve(
    roots: &[PublicKey],
    source: &mut dyn ListSource,
    head: &str,
    state: &mut StateFile,
) -> Result<Resolved, TrustError> {
    let mut notes = Vec::new();
    let first = source.fetch(head).map_err(|message| TrustError::Fetch {
        what: source.describe(head),
        message,
    })?;
    let Some(fetched) = first else {
        return Ok(Resolved::roots(roots, &state.state, notes));
    };
    let revoked_before = state.state.revoked.clone();
    let root_ids: Vec<String> = roots.iter().map(id).collect();
    let Some(mut chain) = walk_back(
        &root_ids,
        source,
        head,
        fetched,
        &revoked_before,
        &mut notes,
    )?
    else {
        return Ok(Resolved::roots(roots, &state.state, notes));
    };
    chain.reverse();
    let anchor = chain[0].signer.clone();
    let Forward {
        trusted,
        revoked,
        added,
    } = walk_forward(roots, &chain, &revoked_before)?;
    let newest = chain.last().expect("at least one list");
    let seen = check_replay(&state.state, &anchor, newest)?;
    if state.state.seen.get(&anchor) != Some(&seen) || state.state.revoked != revoked {
        state.state.seen.insert(anchor.clone(), seen);
        state.state.revoked = revoked.clone();
        state.save()?;
    }
    let keys = trusted
        .into_iter()
        .filter(|k| !revoked.contains_key(&id(k)))
        .collect();
    Ok(Resolved {
        keys,
        revoked,
        chain: Some(Chain {
            sequence: newest.list.sequence,
            lists: chain.len(),
            anchor,
            added,
        }),
        notes,
    })
}

/// Whether key `kid` may sign a list of `sequence`: a revoked key may still have signed the
/// lists up to the one that revoked it (which it usually signs itself).
fn may_sign(kid: &str, sequence: u64, revoked: &BTreeMap<String, Revocation>) -> bool {
    revoked.get(kid).is_none_or(|r| sequence <= r.sequence)
}

/// Back from the newest list (`fetched`, named `head`) to one signed by a root key, newest
/// first. None when the chain does not reach a root (`notes` says why): its keys are not used.
fn walk_back(
    root_ids: &[String],
    source: &mut dyn ListSource,
    head: &str,
    mut fetched: Fetched,
    revoked_before: &BTreeMap<String, Revocation>,
    notes: &mut Vec<String>,
) -> Result<Option<Vec<Link>>, TrustError> {
    let mut chain: Vec<Link> = Vec::new();
    let mut name = head.to_string();
    let mut expect: Option<Previous> = None;
    loop {
        let what = source.describe(&name);
        if chain.len() >= MAX_CHAIN {
            return Err(TrustError::TooLong { what });
        }
        let link = read_link(what.clone(), &mut fetched, expect.as_ref(), revoked_before)?;
        let signer = link.signer.clone();
        let anchored = root_ids.contains(&signer);
        let previous = link.list.previous.clone();
        chain.push(link);
        if anchored {
            return Ok(Some(chain));
        }
        let Some(p) = previous else {
            notes.push(format!(
                "{} is signed by key {signer}, which is not trusted (and no earlier key list leads to a trusted key); its keys are not used",
                chain[0].what
            ));
            return Ok(None);
        };
        let newer = chain.last().expect("pushed").list.sequence;
        if numbered_sequence(&p.url) != Some(p.sequence) || p.sequence >= newer {
            return Err(TrustError::BadList {
                what,
                message: format!(
                    "its previous list must be keys-<N>.json in the same directory with N below {newer}, not {:?} (sequence {})",
                    p.url, p.sequence
                ),
            });
        }
        match source.fetch(&p.url) {
            Ok(Some(f)) => fetched = f,
            Ok(None) => {
                notes.push(format!(
                    "{} is signed by key {signer}, which is not trusted, and the key list before it, {}, is missing; its keys are not used",
                    chain[0].what,
                    source.describe(&p.url)
                ));
                return Ok(None);
            }
            Err(message) => {
                return Err(TrustError::Fetch {
                    what: source.describe(&p.url),
                    message,
                });
            }
        }
        name = p.url.clone();
        expect = Some(p);
    }
}

/// Reads one list of a chain, `what`: it must be the one the newer list pinned (`expect`), be
/// signed, and not by a key revoked before it. Its signature is verified on the way forward.
fn read_link(
    what: String,
    fetched: &mut Fetched,
    expect: Option<&Previous>,
    revoked_before: &BTreeMap<String, Revocation>,
) -> Result<Link, TrustError> {
    if let Some(p) = expect
        && sha256_hex(&fetched.bytes) != p.sha256
    {
        return Err(TrustError::PreviousChanged { what });
    }
    let list = parse_list(&what, &fetched.bytes)?;
    if let Some(p) = expect
        && list.sequence != p.sequence
    {
        return Err(TrustError::BadList {
            what,
            message: format!(
                "its sequence is {}, the newer list says {}",
                list.sequence, p.sequence
            ),
        });
    }
    let Some(signature) = fetched.signature.take() else {
        return Err(TrustError::Unsigned { what });
    };
    let sbox = minisign::SignatureBox::from_string(&signature).map_err(|e| {
        TrustError::Sign(SignError::BadSignature {
            what: what.clone(),
            message: e.to_string(),
        })
    })?;
    let signer = sign::key_id(sbox.keynum());
    if let Some(r) = revoked_before.get(&signer)
        && !may_sign(&signer, list.sequence, revoked_before)
    {
        return Err(TrustError::Revoked {
            what,
            key_id: signer,
            sequence: r.sequence,
            by: r.by.clone(),
        });
    }
    Ok(Link {
        what,
        list,
        bytes: std::mem::take(&mut fetched.bytes),
        signature,
        signer,
    })
}

/// The keys and revocations after a chain, and the key IDs it added.
struct Forward {
    trusted: Vec<PublicKey>,
    revoked: BTreeMap<String, Revocation>,
    added: Vec<String>,
}

/// Forward from the anchored list to the newest (`chain`, oldest first), each signed by a key
/// the lists before it trust.
fn walk_forward(
    roots: &[PublicKey],
    chain: &[Link],
    revoked_before: &BTreeMap<String, Revocation>,
) -> Result<Forward, TrustError> {
    let mut f = Forward {
        trusted: roots.to_vec(),
        revoked: revoked_before.clone(),
        added: Vec::new(),
    };
    for link in chain {
        verify_link(link, &f.trusted, &f.revoked)?;
        let bad_key = |e: SignError| TrustError::BadList {
            what: link.what.clone(),
            message: e.to_string(),
        };
        for k in &link.list.keys {
            let pk = sign::parse_public(k).map_err(bad_key)?;
            let kid = id(&pk);
            if !f.trusted.iter().any(|t| id(t) == kid) {
                f.trusted.push(pk);
                f.added.push(kid);
            }
        }
        for k in &link.list.revoke {
            let pk = sign::parse_public(k).map_err(bad_key)?;
            let kid = id(&pk);
            let entry = Revocation {
                key: sign::public_base64(&pk),
                sequence: link.list.sequence,
                by: link.signer.clone(),
            };
            match f.revoked.get(&kid) {
                Some(r) if r.sequence <= entry.sequence => {}
                _ => {
                    f.revoked.insert(kid.clone(), entry);
                }
            }
        }
    }
    Ok(f)
}

/// Verifies `link` with the keys that may sign it: those `trusted` not revoked before its
/// sequence.
fn verify_link(
    link: &Link,
    trusted: &[PublicKey],
    revoked: &BTreeMap<String, Revocation>,
) -> Result<(), TrustError> {
    let signers: Vec<PublicKey> = trusted
        .iter()
        .filter(|k| may_sign(&id(k), link.list.sequence, revoked))
        .cloned()
        .collect();
    match sign::verify_bytes(&signers, &link.bytes, &link.signature, &link.what) {
        Ok(_) => Ok(()),
        Err(SignError::Mismatch { key_id, .. }) => Err(TrustError::Tampered {
            what: link.what.clone(),
            key_id,
        }),
        Err(SignError::Untrusted { key_id, .. }) => Err(match revoked.get(&key_id) {
            Some(r) => TrustError::Revoked {
                what: link.what.clone(),
                key_id,
                sequence: r.sequence,
                by: r.by.clone(),
            },
            None => TrustError::NotAllowed {
                what: link.what.clone(),
                key_id,
                reason: "the key list before it does not trust".into(),
            },
        }),
        Err(e) => Err(TrustError::Sign(e)),
    }
}

/// What the state will record for `anchor` once `newest` is accepted; refused as a replay when
/// the state has seen a newer list, or another under the same sequence.
fn check_replay(state: &State, anchor: &str, newest: &Link) -> Result<Seen, TrustError> {
    let sha = sha256_hex(&newest.bytes);
    if let Some(seen) = state.seen.get(anchor) {
        let relation = if newest.list.sequence < seen.sequence {
            Some("older than")
        } else if newest.list.sequence == seen.sequence && seen.sha256 != sha {
            Some("the same as, but the list differs from,")
        } else {
            None
        };
        if let Some(relation) = relation {
            return Err(TrustError::Replay {
                what: newest.what.clone(),
                sequence: newest.list.sequence,
                seen: seen.sequence,
                relation: relation.into(),
                anchor: anchor.to_string(),
            });
        }
    }
    Ok(Seen {
        sequence: newest.list.sequence,
        sha256: sha,
    })
}
