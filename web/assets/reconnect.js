// What could not load because the service did not answer — the page opened from the service
// worker's copy while the service was stopped or the device offline, or the service went away
// meanwhile — waits here, and runs again as soon as the service answers: when the list stream
// connects again (it reconnects by itself, sidebar.js) or any API call succeeds.

import { ApiError, apiEvents } from './api.js';

const waiting = new Map(); // a name (one waiter each) → what to run

// Whether `error` says the service could not be reached (rather than refused): no answer, or a
// proxy's in front of it.
export function isUnreachable(error) {
  return error instanceof ApiError && (error.code === 'network' || [502, 503, 504].includes(error.status));
}

// Runs `run` once the service answers again; a later call with the same name replaces it.
export function whenBack(name, run) {
  waiting.set(name, run);
}

export function serviceBack() {
  const runs = [...waiting.values()];
  waiting.clear();
  for (const run of runs) run();
}

apiEvents.addEventListener('success', serviceBack);
