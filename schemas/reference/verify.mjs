#!/usr/bin/env node
// An independent verifier of evidencestore digests, written from schemas/CANONICAL.md
// alone. It shares no code with the Python package: its own strict JSON reader, its
// own canonical writer, BLAKE3 from @noble/hashes, its own RFC 6962 / 9162 tree.
//
//   node verify.mjs --vectors DIR
//       check every vector of schemas/vectors/ (blob, canonical, leaf, node, root,
//       header, proof)
//   node verify.mjs REPO [--proofs DIR] [--attestations DIR]
//       recompute every registration of REPO (entry leaves, Merkle root, bundle
//       digest, the blob of every repo entry and of every store entry present in
//       REPO/.evstore), the inclusion proof of every entry, and check every
//       `evstore prove` output under DIR/<bundle>/*.json against it, and every DSSE
//       envelope under the attestations DIR
//
// Prints one JSON summary on stdout; exit 0 when everything matched, 1 on any
// mismatch (each listed on stderr), 2 on bad usage.

import { createHash } from "node:crypto";
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { blake3 } from "@noble/hashes/blake3";

// -- strict JSON ------------------------------------------------------------------
// Integers are kept exactly (BigInt); any other number is kept as its text and
// refused when it reaches a hashed structure. Duplicate keys and unpaired surrogates
// are refused.
class Num {
  constructor(text) {
    this.text = text;
    this.int = /^-?(0|[1-9][0-9]*)$/.test(text) ? BigInt(text) : null;
  }
}

export function parse(text) {
  let i = 0;
  const fail = (why) => {
    throw new Error(`JSON: ${why} at offset ${i}`);
  };
  const ws = () => {
    while (i < text.length && " \t\n\r".includes(text[i])) i++;
  };
  const value = () => {
    ws();
    const c = text[i];
    if (c === "{") return object();
    if (c === "[") return array();
    if (c === '"') return string();
    if (c === "-" || (c >= "0" && c <= "9")) return number();
    for (const [word, v] of [["true", true], ["false", false], ["null", null]]) {
      if (text.startsWith(word, i)) {
        i += word.length;
        return v;
      }
    }
    return fail("unexpected character");
  };
  const object = () => {
    i++;
    const out = new Map();
    ws();
    if (text[i] === "}") {
      i++;
      return out;
    }
    for (;;) {
      ws();
      if (text[i] !== '"') fail("expected a key");
      const key = string();
      if (out.has(key)) fail(`duplicate key ${JSON.stringify(key)}`);
      ws();
      if (text[i++] !== ":") fail("expected ':'");
      out.set(key, value());
      ws();
      const c = text[i++];
      if (c === "}") return out;
      if (c !== ",") fail("expected ',' or '}'");
    }
  };
  const array = () => {
    i++;
    const out = [];
    ws();
    if (text[i] === "]") {
      i++;
      return out;
    }
    for (;;) {
      out.push(value());
      ws();
      const c = text[i++];
      if (c === "]") return out;
      if (c !== ",") fail("expected ',' or ']'");
    }
  };
  const number = () => {
    const m = /^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?/.exec(text.slice(i, i + 400));
    if (!m || !m[0]) fail("bad number");
    i += m[0].length;
    return new Num(m[0]);
  };
  const string = () => {
    i++;
    let out = "";
    for (;;) {
      if (i >= text.length) fail("unterminated string");
      const c = text[i++];
      if (c === '"') break;
      if (c < " ") fail("raw control character in a string");
      if (c !== "\\") {
        out += c;
        continue;
      }
      const e = text[i++];
      const simple = { '"': '"', "\\": "\\", "/": "/", b: "\b", f: "\f", n: "\n", r: "\r", t: "\t" };
      if (e in simple) out += simple[e];
      else if (e === "u") {
        const hex = text.slice(i, i + 4);
        if (!/^[0-9a-fA-F]{4}$/.test(hex)) fail("bad \\u escape");
        i += 4;
        out += String.fromCharCode(parseInt(hex, 16));
      } else fail("bad escape");
    }
    // pairs of surrogates are one character; an unpaired one is not Unicode
    for (let k = 0; k < out.length; k++) {
      const u = out.charCodeAt(k);
      if (u >= 0xd800 && u <= 0xdbff) {
        const v = out.charCodeAt(k + 1);
        if (!(v >= 0xdc00 && v <= 0xdfff)) fail("unpaired surrogate");
        k++;
      } else if (u >= 0xdc00 && u <= 0xdfff) fail("unpaired surrogate");
    }
    return out;
  };
  const result = value();
  ws();
  if (i !== text.length) fail("trailing data");
  return result;
}

export function parseBytes(bytes) {
  const text = new TextDecoder("utf-8", { fatal: true }).decode(bytes);
  return parse(text.charCodeAt(0) === 0xfeff ? fail("byte order mark") : text);
}

function fail(why) {
  throw new Error(why);
}

// -- canonical JSON -----------------------------------------------------------------
function byCodePoint(a, b) {
  const x = Array.from(a, (c) => c.codePointAt(0));
  const y = Array.from(b, (c) => c.codePointAt(0));
  for (let k = 0; k < Math.min(x.length, y.length); k++) {
    if (x[k] !== y[k]) return x[k] - y[k];
  }
  return x.length - y.length;
}

function quote(s) {
  let out = '"';
  for (const ch of s) {
    const u = ch.codePointAt(0);
    if (ch === '"') out += '\\"';
    else if (ch === "\\") out += "\\\\";
    else if (u === 8) out += "\\b";
    else if (u === 9) out += "\\t";
    else if (u === 10) out += "\\n";
    else if (u === 12) out += "\\f";
    else if (u === 13) out += "\\r";
    else if (u < 0x20) out += "\\u" + u.toString(16).padStart(4, "0");
    else out += ch;
  }
  return out + '"';
}

export function canonicalText(v) {
  if (v === null) return "null";
  if (v === true) return "true";
  if (v === false) return "false";
  if (typeof v === "string") return quote(v);
  if (v instanceof Num) {
    if (v.int === null) throw new Error(`a non-integer number (${v.text}) in a hashed structure`);
    return v.int.toString();
  }
  if (Array.isArray(v)) return "[" + v.map(canonicalText).join(",") + "]";
  if (v instanceof Map) {
    const keys = [...v.keys()].sort(byCodePoint);
    return "{" + keys.map((k) => quote(k) + ":" + canonicalText(v.get(k))).join(",") + "}";
  }
  throw new Error(`not a JSON value: ${typeof v}`);
}

export const canonical = (v) => new TextEncoder().encode(canonicalText(v));

// -- digests ------------------------------------------------------------------------
const hex = (b) => Buffer.from(b).toString("hex");
const fromHex = (h) => new Uint8Array(Buffer.from(h, "hex"));
const cat = (...parts) => {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let k = 0;
  for (const p of parts) {
    out.set(p, k);
    k += p.length;
  }
  return out;
};
const H = (bytes) => blake3(bytes);
const PREFIX = "blake3:";
const digestHex = (d) => {
  if (typeof d !== "string" || !/^blake3:[0-9a-f]{64}$/.test(d)) throw new Error(`not a digest: ${d}`);
  return d.slice(PREFIX.length);
};

export const blob = (bytes) => PREFIX + hex(H(bytes));
export const leaf = (entry) => H(cat([0], canonical(entry)));
export const node = (l, r) => H(cat([1], l, r));

export function mth(leaves) {
  const n = leaves.length;
  if (n === 0) return H(new Uint8Array());
  if (n === 1) return leaves[0];
  let k = 1;
  while (k * 2 < n) k *= 2;
  return node(mth(leaves.slice(0, k)), mth(leaves.slice(k)));
}

export function headerDigest(metadata, name, root, schemaVersion) {
  const header = new Map([
    ["metadata", metadata],
    ["name", name],
    ["root", root],
    ["schema_version", schemaVersion],
  ]);
  return PREFIX + hex(H(cat([2], canonical(header))));
}

function manifestDigest(manifest, root) {
  const sv = manifest.has("schema_version") ? manifest.get("schema_version") : new Num("1");
  return headerDigest(manifest.get("metadata"), manifest.get("name"), root, sv);
}

// RFC 6962 section 2.1.1 PATH(m, D[n])
export function auditPath(m, leaves) {
  const n = leaves.length;
  if (n <= 1) return [];
  let k = 1;
  while (k * 2 < n) k *= 2;
  if (m < k) return [...auditPath(m, leaves.slice(0, k)), mth(leaves.slice(k))];
  return [...auditPath(m - k, leaves.slice(k)), mth(leaves.slice(0, k))];
}

// RFC 9162 section 2.1.3.2
export function rootFromPath(leafHash, index, size, path) {
  if (index >= size) return null;
  let fn = index;
  let sn = size - 1;
  let r = leafHash;
  for (const p of path) {
    if (sn === 0) return null;
    if (fn % 2 === 1 || fn === sn) {
      r = node(p, r);
      while (fn % 2 === 0 && fn !== 0) {
        fn >>= 1;
        sn >>= 1;
      }
    } else r = node(r, p);
    fn >>= 1;
    sn >>= 1;
  }
  return sn === 0 ? r : null;
}

const small = (v, what) => {
  if (!(v instanceof Num) || v.int === null || v.int < 0n || v.int > 2n ** 31n) {
    throw new Error(`${what} is not a small non-negative integer`);
  }
  return Number(v.int);
};

/** The problems of a proof (a parsed JSON object); empty when it holds for `trusted`. */
export function proofProblems(proof, trusted) {
  const problems = [];
  const index = small(proof.get("leaf_index"), "leaf_index");
  const size = small(proof.get("tree_size"), "tree_size");
  const path = proof.get("audit_path").map((d) => fromHex(digestHex(d)));
  const r = rootFromPath(leaf(proof.get("entry")), index, size, path);
  if (r === null) problems.push("audit path does not fit leaf_index and tree_size");
  else if (PREFIX + hex(r) !== proof.get("root")) problems.push(`entry does not hash to root ${proof.get("root")}`);
  const d = headerDigest(proof.get("metadata"), proof.get("bundle"), proof.get("root"), proof.get("schema_version"));
  if (d !== proof.get("bundle_digest")) problems.push(`header hashes to ${d}, proof claims ${proof.get("bundle_digest")}`);
  if (trusted !== undefined && proof.get("bundle_digest") !== trusted) problems.push(`proof is for ${proof.get("bundle_digest")}, trusted ${trusted}`);
  return problems;
}

// -- a repository --------------------------------------------------------------------
function storePath(repo, digest) {
  const h = digestHex(digest);
  return join(repo, ".evstore", "blobs", "blake3", h.slice(0, 2), h);
}

export function verifyRepository(repo, proofsDir, attestationsDir) {
  const errors = [];
  const counts = { registrations: 0, entries: 0, leaves: 0, roots: 0, digests: 0, blobs: 0, proofs_recomputed: 0, proofs_checked: 0, attestations: 0, subjects: 0 };
  const registry = new Map();
  const evidence = join(repo, "evidence");
  for (const name of readdirSync(evidence).sort()) {
    if (name.startsWith(".")) continue;
    const file = join(evidence, name, "bundle.json");
    const where = `evidence/${name}/bundle.json`;
    try {
      const bytes = readFileSync(file);
      const reg = parseBytes(bytes);
      const manifest = reg.get("manifest");
      const entries = manifest.get("entries");
      const leaves = entries.map(leaf);
      counts.leaves += leaves.length;
      counts.entries += entries.length;
      const root = PREFIX + hex(mth(leaves));
      if (root !== reg.get("root")) errors.push(`${where}: entries hash to root ${root}, registration says ${reg.get("root")}`);
      else counts.roots++;
      const digest = manifestDigest(manifest, root);
      if (digest !== reg.get("digest")) errors.push(`${where}: manifest hashes to ${digest}, registration says ${reg.get("digest")}`);
      else counts.digests++;
      if (manifest.get("name") !== name) errors.push(`${where}: manifest name ${manifest.get("name")} is not its directory`);
      for (const [i, e] of entries.entries()) {
        const d = e.get("descriptor");
        const p = e.get("location") === "repo" ? join(evidence, name, e.get("path")) : storePath(repo, d.get("digest"));
        if (e.get("location") === "repo" || existsSync(p)) {
          const data = readFileSync(p);
          if (blob(data) !== d.get("digest") || BigInt(data.length) !== d.get("size").int) {
            errors.push(`${where}: entry ${e.get("path")} hashes to ${blob(data)} (${data.length} bytes), registered ${d.get("digest")}`);
          } else counts.blobs++;
        }
        // the inclusion proof of every entry, recomputed and checked
        const proof = new Map([
          ["bundle", manifest.get("name")], ["bundle_digest", digest],
          ["schema_version", manifest.has("schema_version") ? manifest.get("schema_version") : new Num("1")],
          ["metadata", manifest.get("metadata")], ["entry", e], ["leaf_index", new Num(String(i))],
          ["tree_size", new Num(String(leaves.length))], ["root", root],
          ["audit_path", auditPath(i, leaves).map((h) => PREFIX + hex(h))],
        ]);
        const problems = proofProblems(proof, reg.get("digest"));
        if (problems.length) errors.push(`${where}: own proof of ${e.get("path")}: ${problems.join("; ")}`);
        else counts.proofs_recomputed++;
      }
      registry.set(name, { bytes, reg, leaves, root, digest });
      counts.registrations++;
    } catch (exc) {
      errors.push(`${where}: ${exc.message}`);
    }
  }
  if (proofsDir) {
    for (const bundle of readdirSync(proofsDir).sort()) {
      for (const f of readdirSync(join(proofsDir, bundle)).sort()) {
        const where = `proof ${bundle}/${f}`;
        try {
          const proof = parseBytes(readFileSync(join(proofsDir, bundle, f)));
          const known = registry.get(bundle);
          if (!known) throw new Error(`no registration of bundle ${bundle}`);
          const problems = proofProblems(proof, known.reg.get("digest"));
          // and it is the proof this verifier computes for that entry
          const index = small(proof.get("leaf_index"), "leaf_index");
          const mine = auditPath(index, known.leaves).map((h) => PREFIX + hex(h));
          const entries = known.reg.get("manifest").get("entries");
          if (canonicalText(proof.get("entry")) !== canonicalText(entries[index])) problems.push("entry is not the registered one");
          if (mine.join() !== proof.get("audit_path").join()) problems.push("audit path differs from the recomputed one");
          if (proof.get("root") !== known.root) problems.push("root differs from the recomputed one");
          if (problems.length) errors.push(`${where}: ${problems.join("; ")}`);
          else counts.proofs_checked++;
        } catch (exc) {
          errors.push(`${where}: ${exc.message}`);
        }
      }
    }
  }
  if (attestationsDir) {
    for (const f of readdirSync(attestationsDir).sort()) {
      if (!f.endsWith(".json")) continue;
      const where = `attestation ${f}`;
      try {
        const envelope = parseBytes(readFileSync(join(attestationsDir, f)));
        const statement = parseBytes(Buffer.from(envelope.get("payload"), "base64"));
        const predicate = statement.get("predicate");
        for (const subject of statement.get("subject")) {
          const name = subject.get("name");
          const want = subject.get("digest");
          const file = join(repo, name);
          if (existsSync(file)) {
            const bytes = readFileSync(file);
            const sha = createHash("sha256").update(bytes).digest("hex");
            if (want.get("blake3") !== hex(H(bytes)) || want.get("sha256") !== sha) {
              errors.push(`${where}: subject ${name} does not hash to its digests`);
            } else counts.subjects++;
            continue;
          }
          // a store entry whose bytes are not here: its digest must be the registered one
          const [top, bundle, ...rest] = name.split("/");
          const known = top === "evidence" ? registry.get(bundle) : undefined;
          const entry = known?.reg.get("manifest").get("entries").find((e) => e.get("path") === rest.join("/"));
          if (!entry || PREFIX + want.get("blake3") !== entry.get("descriptor").get("digest")) {
            errors.push(`${where}: subject ${name} is not a registered entry of that digest`);
          } else counts.subjects++;
        }
        if (predicate.has("bundle_digest")) {
          const known = registry.get(predicate.get("bundle"));
          if (!known || known.digest !== predicate.get("bundle_digest") || known.root !== predicate.get("root")) {
            errors.push(`${where}: predicate does not match the recomputed bundle ${predicate.get("bundle")}`);
          } else if (Number(predicate.get("entries").int) !== known.leaves.length) {
            errors.push(`${where}: predicate counts ${predicate.get("entries").text} entries`);
          }
        }
        counts.attestations++;
      } catch (exc) {
        errors.push(`${where}: ${exc.message}`);
      }
    }
  }
  return { counts, errors };
}

// -- vectors -------------------------------------------------------------------------
function check(errors, what, got, want) {
  if (got !== want) errors.push(`${what}: got ${got}, want ${want}`);
  return got === want;
}

export function verifyVectors(dir) {
  const errors = [];
  let n = 0;
  const load = (f) => parseBytes(readFileSync(join(dir, f)));
  for (const v of load("blob.json")) n += check(errors, `blob ${v.get("name")}`, blob(fromHex(v.get("input_hex"))), v.get("digest"));
  for (const v of load("canonical.json")) {
    let got;
    try {
      got = canonicalText(parse(v.get("input")));
    } catch (exc) {
      got = `error`;
    }
    n += check(errors, `canonical ${v.get("name")}`, got, v.has("canonical") ? v.get("canonical") : "error");
  }
  for (const v of load("leaf.json")) {
    n += check(errors, `leaf ${v.get("name")} bytes`, canonicalText(v.get("entry")), v.get("canonical"));
    n += check(errors, `leaf ${v.get("name")}`, hex(leaf(v.get("entry"))), v.get("leaf"));
  }
  for (const v of load("node.json")) n += check(errors, "node", hex(node(fromHex(v.get("left")), fromHex(v.get("right")))), v.get("node"));
  for (const v of load("root.json")) {
    const leaves = v.get("leaves").map(fromHex);
    n += check(errors, `root of ${leaves.length}`, hex(mth(leaves)), v.get("root"));
    for (const [i, path] of v.get("audit_paths").entries()) {
      n += check(errors, `path ${i} of ${leaves.length}`, auditPath(i, leaves).map(hex).join(), path.join());
    }
  }
  for (const v of load("header.json")) {
    const h = v.get("header");
    n += check(errors, `header ${v.get("name")} bytes`, canonicalText(h), v.get("canonical"));
    n += check(errors, `header ${v.get("name")}`, headerDigest(h.get("metadata"), h.get("name"), h.get("root"), h.get("schema_version")), v.get("digest"));
  }
  for (const v of load("proof.json")) {
    const problems = proofProblems(v.get("proof"), v.get("trusted"));
    n += check(errors, `proof ${v.get("name")}`, problems.length === 0, v.get("valid"));
  }
  for (const v of load("registration.json")) {
    const manifest = v.get("registration").get("manifest");
    const root = PREFIX + hex(mth(manifest.get("entries").map(leaf)));
    const reg = v.get("registration");
    const holds = root === reg.get("root") && manifestDigest(manifest, root) === reg.get("digest");
    n += check(errors, `registration ${v.get("name")}`, holds, v.get("valid"));
  }
  return { counts: { vectors: n }, errors };
}

// -- command line --------------------------------------------------------------------
function main(argv) {
  const opt = (flag) => {
    const k = argv.indexOf(flag);
    if (k < 0) return undefined;
    const v = argv[k + 1];
    argv.splice(k, 2);
    return v;
  };
  const vectors = opt("--vectors");
  const proofs = opt("--proofs");
  const attestations = opt("--attestations");
  let result;
  if (vectors !== undefined) result = verifyVectors(vectors);
  else if (argv.length === 1 && statSync(argv[0]).isDirectory()) result = verifyRepository(argv[0], proofs, attestations);
  else {
    process.stderr.write("usage: verify.mjs --vectors DIR | REPO [--proofs DIR] [--attestations DIR]\n");
    return 2;
  }
  for (const e of result.errors) process.stderr.write(`MISMATCH ${e}\n`);
  process.stdout.write(JSON.stringify({ ok: result.errors.length === 0, ...result.counts, mismatches: result.errors.length }) + "\n");
  return result.errors.length === 0 ? 0 : 1;
}

if (import.meta.url === `file://${process.argv[1]}`) process.exitCode = main(process.argv.slice(2));
