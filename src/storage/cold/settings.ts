/** The cold tier's settings (`rill serve --cold-*`), apart from its code so that settings load nothing of it. */

export interface ColdSettings {
  /** A stream's last this many bytes stay hot. */
  hotBytes: number;
  /** Bytes younger than this stay hot (0: age keeps nothing hot). */
  hotAgeMs: number;
  /** An upload's size: a segment holds whole rows up to it. */
  segmentBytes: number;
  /** Decoded segments kept in memory for reads. */
  cacheBytes: number;
  /** Sealed bytes awaiting upload past which writes that add data are refused with 507 (0: never). */
  maxBacklogBytes: number;
  /** Between two passes of the uploader. */
  uploadIntervalMs: number;
  /** The longest wait before retrying after failed passes (the wait doubles from UPLOAD_BACKOFF_BASE_MS up to it). */
  uploadRetryMaxMs: number;
}

export const DEFAULT_COLD_SETTINGS: ColdSettings = {
  hotBytes: 64 * 1024 * 1024,
  hotAgeMs: 10 * 60 * 1000,
  segmentBytes: 4 * 1024 * 1024,
  cacheBytes: 64 * 1024 * 1024,
  maxBacklogBytes: 1024 * 1024 * 1024,
  uploadIntervalMs: 5_000,
  uploadRetryMaxMs: 60_000,
};

/** A failed upload pass waits this long, doubling with each failure in a row up to uploadRetryMaxMs. */
export const UPLOAD_BACKOFF_BASE_MS = 500;
