// What the file tools saw of each file, in the order of the timeline: what `read_file` read
// (whole, from its first line) and what `write_file` wrote. A later write's card shows its diff
// against the last content seen before it.

const fileContents = new Map(); // path → [{ seq, content }]

export function forgetFileContents() {
  fileContents.clear();
}

function normalPath(path) {
  return String(path || '').replace(/^\.\//, '');
}

export function noteFileContent(item) {
  if (item.kind !== 'tool_call' || item.status !== 'completed') return;
  const args = item.arguments || {};
  let content = null;
  if (item.name === 'read_file' && !args.offset) {
    const read = readText(item.output);
    if (read.whole) content = read.text;
  }
  if (item.name === 'write_file' && typeof args.content === 'string') content = args.content;
  if (content === null) return;
  const path = normalPath(args.path);
  const seen = fileContents.get(path) || [];
  if (!seen.some((entry) => entry.seq === item.seq)) seen.push({ seq: item.seq, content });
  seen.sort((a, b) => a.seq - b.seq);
  fileContents.set(path, seen);
}

// The text of a `read_file` result (numbered lines, `cat -n` style: the number right-aligned,
// a tab, the line); `whole` unless a note says lines were cut or more remain.
export function readText(output) {
  const lines = typeof output === 'string' && output ? output.split('\n') : [];
  const texts = [];
  let whole = true;
  for (const line of lines) {
    const numbered = /^ *\d+\t(.*)$/.exec(line);
    if (!numbered) {
      whole = false;
      continue;
    }
    if (numbered[1].includes('[... line cut:')) whole = false;
    texts.push(numbered[1]);
  }
  return { text: texts.length ? `${texts.join('\n')}\n` : '', lines: texts.length, whole };
}

export function knownContent(path, seq) {
  const seen = (fileContents.get(normalPath(path)) || []).filter((entry) => entry.seq < seq);
  return seen.length ? seen[seen.length - 1].content : null;
}
