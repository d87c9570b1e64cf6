// Flax logical → mesh axis rules as people write them: ('batch', 'data'), ('hidden', 'model'),
// ('embed', None), ('heads', ('x', 'y')) — or the same as JSON — parsed by a small tokenizer and grammar
// (never eval), and printed back. The server checks the rules again and applies Flax's semantics.

/** @typedef {[string, string | string[] | null]} Rule */
/** @typedef {{kind: string, value: string, col: number}} Token kind: ( ) [ ] , str none; value: a str's text */

/**
 * @param {string} text
 * @returns {Rule[]}
 */
export function parseRules(text) {
  const toks = tokenize(text);
  let i = 0;
  const peek = () => toks[i];
  const next = () => toks[i++];
  const expect = (/** @type {string} */ kind) => {
    const t = next();
    if (!t || t.kind !== kind) throw new Error(`expected ${kind === "str" ? "a quoted name" : `'${kind}'`} at column ${t ? t.col : text.length + 1}`);
    return t;
  };
  const open = (/** @type {Token | undefined} */ t) => t && (t.kind === "(" || t.kind === "[");
  const closeOf = (/** @type {string} */ k) => (k === "(" ? ")" : "]");

  /** @returns {string | string[] | null} */
  function target() {
    const t = next();
    if (!t) throw new Error("a rule is missing its mesh axes");
    if (t.kind === "none") return null;
    if (t.kind === "str") return t.value;
    if (open(t)) {
      const names = [];
      while (peek() && peek().kind !== closeOf(t.kind)) {
        names.push(expect("str").value);
        if (peek() && peek().kind === ",") next();
      }
      expect(closeOf(t.kind));
      return names;
    }
    throw new Error(`expected a mesh axis name, a tuple of them or None at column ${t.col}`);
  }

  /** @returns {Rule} */
  function rule() {
    const t = next();
    if (!open(t)) throw new Error(`expected a rule like ('batch', 'data') at column ${t ? t.col : text.length + 1}`);
    const name = expect("str").value;
    expect(",");
    const mesh = target();
    if (peek() && peek().kind === ",") next();
    expect(closeOf(t.kind));
    return [name, mesh];
  }

  const rules = [];
  // An outer list or tuple around the rules is optional: ((...), (...)) or [[...], [...]].
  const t0 = peek();
  const wrapped = open(t0) && toks[1] && open(toks[1]);
  if (wrapped) next();
  while (i < toks.length) {
    if (wrapped && peek().kind === closeOf(t0.kind)) {
      next();
      break;
    }
    rules.push(rule());
    if (peek() && peek().kind === ",") next();
  }
  if (i < toks.length) throw new Error(`unexpected text after the rules at column ${toks[i].col}`);
  return rules;
}

/** @param {string} text */
function tokenize(text) {
  /** @type {Token[]} */
  const out = [];
  let i = 0;
  while (i < text.length) {
    const c = text[i];
    if (/\s/.test(c)) {
      i++;
    } else if ("()[],".includes(c)) {
      out.push({ kind: c, value: "", col: i + 1 });
      i++;
    } else if (c === "'" || c === '"') {
      const end = text.indexOf(c, i + 1);
      if (end < 0) throw new Error(`unterminated string at column ${i + 1}`);
      out.push({ kind: "str", value: text.slice(i + 1, end), col: i + 1 });
      i = end + 1;
    } else {
      const m = /^[A-Za-z_]+/.exec(text.slice(i));
      if (m && (m[0] === "None" || m[0] === "null")) {
        out.push({ kind: "none", value: "", col: i + 1 });
        i += m[0].length;
      } else {
        throw new Error(`unexpected ${JSON.stringify(m ? m[0] : c)} at column ${i + 1}: names are quoted, e.g. 'data'`);
      }
    }
  }
  return out;
}

/** The rules as Python: ('batch', 'data'), ('hidden', 'model'). @param {Rule[]} rules */
export function rulesText(rules) {
  const q = (/** @type {string} */ s) => `'${s}'`;
  return rules
    .map(([k, v]) => `(${q(k)}, ${v === null ? "None" : Array.isArray(v) ? `(${v.map(q).join(", ")}${v.length === 1 ? "," : ""})` : q(v)})`)
    .join(", ");
}
