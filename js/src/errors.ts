/** Codes carried by KilnError.code. */
export type KilnErrorCode =
  | 'INVALID_ARGUMENT' // bad shapes, types or values
  | 'OUT_OF_MEMORY'    // an allocation failed (wasm32 memory is 4 GB at most)
  | 'INVALID_HANDLE'   // a freed tensor/model, or one of another engine
  | 'UNSUPPORTED'      // an op or type combination without a kernel
  | 'ABORTED'          // cancelled (KilnAbortError)
  | 'COMPUTE_FAILED'
  | 'BAD_MODEL'        // not a (valid) GGUF file
  | 'MODEL_TOO_LARGE'  // the model cannot fit in wasm32 memory
  | 'BAD_SOURCE'       // a model source that cannot be read
  | 'ENGINE_CLOSED'    // the engine was destroyed
  | 'ENGINE_CRASHED';  // the wasm engine trapped; create a new one

export class KilnError extends Error {
  readonly code: KilnErrorCode;
  constructor(code: KilnErrorCode, message: string) {
    super(message);
    this.name = 'KilnError';
    this.code = code;
  }
}

export class KilnAbortError extends KilnError {
  constructor(message = 'the operation was aborted') {
    super('ABORTED', message);
    this.name = 'KilnAbortError';
  }
}

/** Error as it crosses the worker boundary (the worker protocol's type; not exported by the package). */
export interface WireError { code: KilnErrorCode; message: string }

/** @internal */
export function fromWire(e: WireError): KilnError {
  return e.code === 'ABORTED' ? new KilnAbortError(e.message) : new KilnError(e.code, e.message);
}

/** @internal the message of whatever was thrown (an Error's message, else its string form) */
export function errorText(e: unknown): string {
  return String((e as { message?: unknown } | null)?.message ?? e);
}
