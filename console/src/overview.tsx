/**
 * The server at a glance, atop the first page: what runs (version, engine, up since), what
 * it holds (GET /stats), and charts of the last minutes, sampled every OVERVIEW_POLL_MS:
 * appends and bytes in and out per second (the differences of the node's usage totals,
 * GET /usage) and live readers. Charts are SVG drawn here: nothing loads from elsewhere.
 * A token that may not read the figures (they need admin on `*` with access control on)
 * sees the server's refusal instead.
 */
import { useEffect, useState } from 'preact/hooks';
import type { ServerStats, UsagePage } from '../../src/client/index.js';
import { failureOf, useClient, type Failure } from './api.js';
import { ErrorBox } from './common.js';

export const OVERVIEW_POLL_MS = 1000;
/** Samples kept: two minutes at one a second. */
const MAX_SAMPLES = 120;

interface Sample {
  atMs: number;
  stats: ServerStats;
  totals: UsagePage['totals'] | null;
}

interface Point {
  appends: number;
  bytesIn: number;
  bytesOut: number;
  live: number;
}

/** Rates between consecutive samples; live readers as sampled. */
function pointsOf(samples: Sample[]): Point[] {
  const points: Point[] = [];
  for (let i = 1; i < samples.length; i++) {
    const [a, b] = [samples[i - 1]!, samples[i]!];
    const seconds = Math.max((b.atMs - a.atMs) / 1000, 0.001);
    const rate = (key: keyof UsagePage['totals']) => (a.totals && b.totals ? Math.max(0, b.totals[key] - a.totals[key]) / seconds : 0);
    points.push({ appends: rate('appends'), bytesIn: rate('bytesIn'), bytesOut: rate('bytesOut'), live: b.stats.liveReaders.sse + b.stats.liveReaders.longPoll });
  }
  return points;
}

function useSamples(): { samples: Sample[]; version: string | null; failure: Failure | null } {
  const client = useClient();
  const [samples, setSamples] = useState<Sample[]>([]);
  const [version, setVersion] = useState<string | null>(null);
  const [failure, setFailure] = useState<Failure | null>(null);
  useEffect(() => {
    // /healthz answers without a token: asked once, whatever token the page holds.
    void fetch(`${location.origin}/healthz`)
      .then((res) => res.json() as Promise<{ version: string; commit: string }>)
      .then((health) => setVersion(`${health.version} (${health.commit.slice(0, 12)})`), () => undefined);
  }, []);
  useEffect(() => {
    let live = true;
    setSamples([]);
    const sample = async () => {
      try {
        const [stats, usage] = await Promise.all([client.stats(), client.usage({ limit: 1 }).catch(() => null)]);
        if (!live) return;
        setFailure(null);
        setSamples((before) => [...before, { atMs: Date.now(), stats, totals: usage?.totals ?? null }].slice(-MAX_SAMPLES));
      } catch (error) {
        if (live) setFailure(failureOf(error));
      }
    };
    void sample();
    const timer = setInterval(() => void sample(), OVERVIEW_POLL_MS);
    return () => {
      live = false;
      clearInterval(timer);
    };
  }, [client]);
  return { samples, version, failure };
}

const CHART_WIDTH = 240;
const CHART_HEIGHT = 48;

/** A line of the last values, scaled to the largest; its latest value in figures beside it. */
function Chart({ label, unit, values, testId }: { label: string; unit: string; values: number[]; testId: string }) {
  const latest = values.at(-1) ?? 0;
  const top = Math.max(1, ...values);
  // Until two minutes are sampled the line spans the chart (the time it covers is in its
  // label); then each sample moves it one step left. The latest value is at the right edge.
  const step = CHART_WIDTH / Math.max(1, Math.min(values.length, MAX_SAMPLES) - 1);
  const xOf = (i: number) => CHART_WIDTH - (values.length - 1 - i) * step;
  const points = values.map((v, i) => `${xOf(i).toFixed(1)},${(CHART_HEIGHT - (v / top) * CHART_HEIGHT).toFixed(1)}`).join(' ');
  const shown = latest >= 100 ? Math.round(latest).toLocaleString('en') : latest.toFixed(1);
  return (
    <figure class="chart">
      <figcaption>
        {label}: <strong data-testid={testId}>{shown}</strong> {unit}
      </figcaption>
      <svg width={CHART_WIDTH} height={CHART_HEIGHT} role="img" aria-label={`${label}, the last ${values.length} seconds, up to ${Math.round(top)} ${unit}`}>
        <polyline data-testid={`${testId}-line`} points={points} fill="none" stroke="#1f3a5f" stroke-width="1.5" />
      </svg>
    </figure>
  );
}

function since(iso: string | null): string {
  if (iso === null) return '—';
  const seconds = Math.max(0, Math.round((Date.now() - Date.parse(iso)) / 1000));
  const span = seconds < 120 ? `${seconds} s` : seconds < 7200 ? `${Math.round(seconds / 60)} min` : `${Math.round(seconds / 3600)} h`;
  return `${iso} (${span} ago)`;
}

export function Overview() {
  const { samples, version, failure } = useSamples();
  const latest = samples.at(-1);
  const points = pointsOf(samples);
  return (
    <section aria-labelledby="overview">
      <h1 id="overview">Overview</h1>
      {failure && <p class="hint">This token may not read the server's figures (with access control on, they need admin on *).</p>}
      <ErrorBox failure={failure} />
      {latest && (
        <>
          <dl class="info figures">
            <div>
              <dt>Version</dt>
              <dd>{version ?? '—'}</dd>
            </div>
            <div>
              <dt>Storage</dt>
              <dd>{latest.stats.store}</dd>
            </div>
            <div>
              <dt>Serving since</dt>
              <dd>{since(latest.stats.startedAt)}</dd>
            </div>
            <div>
              <dt>Buckets, streams</dt>
              <dd data-testid="overview-streams">
                {latest.stats.buckets}, {latest.stats.streams}
              </dd>
            </div>
            <div>
              <dt>Bytes, messages held</dt>
              <dd>
                {latest.stats.bytes.toLocaleString('en')}, {latest.stats.messages.toLocaleString('en')}
              </dd>
            </div>
            <div>
              <dt>Producers</dt>
              <dd>{latest.stats.producers}</dd>
            </div>
          </dl>
          <div class="charts">
            <Chart label="Appends" unit="messages/s" values={points.map((p) => p.appends)} testId="rate-appends" />
            <Chart label="Bytes in" unit="B/s" values={points.map((p) => p.bytesIn)} testId="rate-bytes-in" />
            <Chart label="Bytes out" unit="B/s" values={points.map((p) => p.bytesOut)} testId="rate-bytes-out" />
            <Chart label="Live readers" unit="readers" values={points.map((p) => p.live)} testId="live-readers" />
          </div>
          {latest.totals === null && <p class="hint">Rates need the usage record (GET /usage), which this token may not read.</p>}
        </>
      )}
    </section>
  );
}
