/** Small shared pieces: the error box, a two-step confirmation, a hook for async actions. */
import type { ComponentChildren } from 'preact';
import { useState } from 'preact/hooks';
import { failureOf, type Failure } from './api.js';

export function ErrorBox({ failure }: { failure: Failure | null }) {
  if (failure === null) return null;
  return (
    <div class="error" role="alert">
      <strong class="error-code">{failure.code}</strong>
      {failure.status !== undefined && <span class="error-status"> (HTTP {failure.status})</span>}
      <span class="error-message">: {failure.message}</span>
    </div>
  );
}

/** Runs an action, keeping its failure for display and refusing a second run while one is busy. */
export function useAction() {
  const [failure, setFailure] = useState<Failure | null>(null);
  const [busy, setBusy] = useState(false);
  const run = async (action: () => Promise<void>): Promise<boolean> => {
    if (busy) return false;
    setBusy(true);
    setFailure(null);
    try {
      await action();
      return true;
    } catch (error) {
      setFailure(failureOf(error));
      return false;
    } finally {
      setBusy(false);
    }
  };
  return { failure, setFailure, busy, run };
}

/** A destructive button that asks first, in the page (keyboard reachable, unlike a browser dialog). */
export function ConfirmButton({ label, question, onConfirm }: { label: string; question: string; onConfirm: () => void }) {
  const [asking, setAsking] = useState(false);
  if (!asking) {
    return (
      <button type="button" class="danger" onClick={() => setAsking(true)}>
        {label}
      </button>
    );
  }
  return (
    <span class="confirm" role="group" aria-label={question}>
      <span>{question}</span>{' '}
      <button
        type="button"
        class="danger"
        autoFocus
        onClick={() => {
          setAsking(false);
          onConfirm();
        }}
      >
        Yes, {label.toLowerCase()}
      </button>{' '}
      <button type="button" onClick={() => setAsking(false)}>
        Cancel
      </button>
    </span>
  );
}

/**
 * A table with its caption (its accessible name) and column headings; the rows are the
 * children. It scrolls sideways in its own box on a narrow window, which takes focus so
 * that the keyboard can scroll it too.
 */
export function DataTable({ caption, columns, children }: { caption: string; columns: string[]; children: ComponentChildren }) {
  return (
    <div class="table-wrap" role="region" aria-label={`${caption} (scrolls sideways)`} tabIndex={0}>
      <table>
        <caption>{caption}</caption>
        <thead>
          <tr>
            {columns.map((column) => (
              <th key={column} scope="col">
                {column}
              </th>
            ))}
          </tr>
        </thead>
        <tbody>{children}</tbody>
      </table>
    </div>
  );
}
