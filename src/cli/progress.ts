/**
 * Progress bars for long CLI jobs (backup, restore, check, a large append from stdin, a
 * read to a file), drawn with cli-progress on stderr when stderr is a terminal. Piped or
 * redirected, nothing is drawn, so scripts and logs get only the command's output.
 */
import { createRequire } from 'node:module';
import type { SingleBar as SingleBarType } from 'cli-progress';

/** cli-progress is loaded only when a bar is drawn: most runs of most commands draw none. */
const loadSingleBar = (): typeof SingleBarType => (createRequire(import.meta.url)('cli-progress') as { SingleBar: typeof SingleBarType }).SingleBar;

export interface Progress {
  /** Sets what is done, and the total when it is known (or has changed). */
  update(done: number, total?: number): void;
  stop(): void;
}

/** Draws nothing: for a job with no end to show (a live read, stdin typed by hand). */
export const NO_PROGRESS: Progress = { update() {}, stop() {} };

function formatBytes(n: number): string {
  if (n < 1024) return `${n} B`;
  const units = ['KiB', 'MiB', 'GiB', 'TiB'];
  let value = n / 1024;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  return `${value.toFixed(1)} ${units[unit]}`;
}

/**
 * A bar labelled `label`, counting `unit` ('bytes' shows sizes); a no-op unless stderr is
 * a terminal. `otherOutput` is true when the command's own output goes to the terminal
 * too (stdout is one): the bar would garble it, so none is drawn then.
 */
export function progressBar(label: string, unit: 'bytes' | string, total = 0, otherOutput = false): Progress {
  if (process.stderr.isTTY !== true || (otherOutput && process.stdout.isTTY === true)) return NO_PROGRESS;
  const bytes = unit === 'bytes';
  const SingleBar = loadSingleBar();
  const bar = new SingleBar({
    stream: process.stderr,
    format: `${label} [{bar}] {percentage}% {shown}`,
    hideCursor: true,
    clearOnComplete: false,
    etaBuffer: 50,
    formatValue: (value, _options, type) => (type === 'percentage' ? String(value).padStart(3) : String(value)),
  });
  const shown = (done: number, all: number) => (bytes ? `${formatBytes(done)} / ${all > 0 ? formatBytes(all) : '?'}` : `${done} / ${all > 0 ? all : '?'} ${unit}`);
  let currentTotal = total;
  bar.start(Math.max(total, 1), 0, { shown: shown(0, total) });
  return {
    update(done, newTotal) {
      if (newTotal !== undefined && newTotal !== currentTotal) {
        currentTotal = newTotal;
        bar.setTotal(Math.max(newTotal, 1));
      }
      bar.update(currentTotal > 0 ? Math.min(done, currentTotal) : 0, { shown: shown(done, currentTotal) });
    },
    stop() {
      bar.stop();
    },
  };
}
