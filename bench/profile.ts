/**
 * Where a CPU profile's time went: `node .bench/build/profile.js FILE.cpuprofile [N]`
 * prints the N functions with the most self time and the N with the most inclusive
 * time, as shares of the profile (idle and garbage collection included).
 */
import { readFileSync } from 'node:fs';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}

interface CpuProfile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

function label(node: ProfileNode): string {
  const { functionName, url, lineNumber } = node.callFrame;
  const file = url.split('/').slice(-2).join('/');
  return `${functionName || '(anonymous)'} ${file}${file ? `:${lineNumber + 1}` : ''}`;
}

/** Microseconds spent with each node on top of the stack. */
function selfTimes(profile: CpuProfile): Map<number, number> {
  const self = new Map<number, number>();
  profile.samples.forEach((id, i) => self.set(id, (self.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0)));
  return self;
}

function print(title: string, totals: Map<string, number>, all: number, top: number): void {
  console.log(title);
  const rows = [...totals].sort((a, b) => b[1] - a[1]).slice(0, top);
  for (const [name, us] of rows) console.log(`${((us / all) * 100).toFixed(1).padStart(6)}%  ${name}`);
}

function main(): void {
  const [file, topArg] = process.argv.slice(2);
  if (!file) throw new Error('usage: node .bench/build/profile.js FILE.cpuprofile [N]');
  const profile = JSON.parse(readFileSync(file, 'utf8')) as CpuProfile;
  const top = Number(topArg ?? 25);
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id);
  const self = selfTimes(profile);
  const all = [...self.values()].reduce((a, b) => a + b, 0);
  const selfByName = new Map<string, number>();
  const inclusive = new Map<string, number>();
  for (const [id, us] of self) {
    const name = label(byId.get(id)!);
    selfByName.set(name, (selfByName.get(name) ?? 0) + us);
    // Each function counts once per sample, however often it is on the stack.
    const seen = new Set<string>();
    for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) {
      const frame = label(byId.get(at)!);
      if (seen.has(frame)) continue;
      seen.add(frame);
      inclusive.set(frame, (inclusive.get(frame) ?? 0) + us);
    }
  }
  print('self time', selfByName, all, top);
  print('\ninclusive time', inclusive, all, top);
}

main();
