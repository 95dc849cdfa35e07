/**
 * The last branch of an exhaustive `switch`: the compiler refuses a call here while a case is
 * unhandled, and a value that slips past the types anyway (a newer peer, a bad cast) fails loudly.
 */
export function assertUnreachable(value: never): never {
  throw new Error(`Unhandled value: ${JSON.stringify(value)}`);
}
