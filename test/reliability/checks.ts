/** Assertions shared by the reliability tests: what every refusal must look like. */
import { expect } from 'vitest';
import { ERROR_STATUS, isErrorCode } from '../../src/protocol/errors.js';

export interface Refusal {
  status: number;
  contentType: string | null;
  body: string;
}

/** Every refusal is JSON `{"code","message"}` with a known code whose status is the one answered. */
export function expectJsonRefusal(refusal: Refusal, status?: number, code?: string): { code: string; message: string } {
  if (status !== undefined) expect(refusal.status).toBe(status);
  expect(refusal.contentType ?? '').toMatch(/^application\/json/);
  const parsed = JSON.parse(refusal.body) as { code: unknown; message: unknown };
  expect(typeof parsed.message).toBe('string');
  expect(isErrorCode(parsed.code)).toBe(true);
  const known = parsed.code as keyof typeof ERROR_STATUS;
  expect(ERROR_STATUS[known]).toBe(refusal.status);
  if (code !== undefined) expect(known).toBe(code);
  return { code: known, message: parsed.message as string };
}

export async function refusalOf(res: Response): Promise<Refusal> {
  return { status: res.status, contentType: res.headers.get('content-type'), body: await res.text() };
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
