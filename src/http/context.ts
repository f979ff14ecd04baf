import type { Logger } from 'pino';
import type { LiveHub } from '../live/hub.js';
import type { Store } from '../storage/store.js';
import type { ServerSettings } from './settings.js';

/** What every handler works with. */
export interface HandlerContext {
  store: Store;
  hub: LiveHub;
  settings: ServerSettings;
  log: Logger;
  /** Wall clock; the only place the HTTP layer reads time. */
  now: () => number;
}
