/// <reference types="vite/client" />

declare module 'virtual:policy-validator' {
  interface AjvError {
    instancePath: string;
    keyword: string;
    message?: string;
    params: Record<string, unknown>;
  }
  interface ValidateFunction {
    (data: unknown): boolean;
    errors?: AjvError[] | null;
  }
  const validate: ValidateFunction;
  export default validate;
  export const policySchema: Record<string, unknown>;
}
