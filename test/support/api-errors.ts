// Test support: the structured error a service call rejects with.
import { expect } from 'vitest';

/** Awaits a call that must fail, checks it failed as an ApiError, and gives its code and message. */
export async function rejection(p: Promise<unknown>): Promise<{ code: string; message: string }> {
  try {
    await p;
  } catch (e) {
    const err = e as { code: string; message: string; name: string };
    expect(err.name).toBe('ApiError');
    return { code: err.code, message: err.message };
  }
  throw new Error('expected a rejection');
}
