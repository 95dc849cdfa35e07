import { Body, Param, PipeTransform, Query } from '@nestjs/common';
import 'reflect-metadata';
import { z } from 'zod';
import { AppError, ErrorCode } from './errors';

export type RequestPart = 'body' | 'query' | 'params';

/** Validates one part of a request against its contract; a failure is a 400 naming every bad field. */
export class ZodValidationPipe<S extends z.ZodType> implements PipeTransform<unknown, z.infer<S>> {
  constructor(
    private readonly schema: S,
    private readonly part: RequestPart,
  ) {}

  transform(value: unknown): z.infer<S> {
    const nul = nulPaths(value, [this.part]);
    if (nul.length > 0) {
      const issues = nul.map((path) => ({ path, message: 'contains a NUL character (\\u0000), which no text field may hold' }));
      throw new AppError(ErrorCode.ValidationFailed, `The request is invalid: ${issues.map((i) => `${i.path}: ${i.message}`).join('; ')}.`, { issues });
    }
    const result = this.schema.safeParse(value ?? (this.part === 'body' ? undefined : {}));
    if (result.success) return result.data;
    const issues = result.error.issues.map((i) => ({ path: [this.part, ...i.path.map(String)].join('.'), message: describe(i) }));
    // Messages that are whole sentences keep their own full stop; the summary adds the last one.
    const summary = issues.map((i) => `${i.path}: ${i.message.replace(/\.$/, '')}`).join('; ');
    throw new AppError(ErrorCode.ValidationFailed, `The request is invalid: ${summary}.`, { issues });
  }
}

/**
 * Where a value holds a NUL character, in a string or a key. PostgreSQL cannot store one in text, so
 * it is refused up front with the field's path instead of failing deep in a write.
 */
export function nulPaths(value: unknown, at: string[], out: string[] = []): string[] {
  if (out.length >= 20) return out;
  if (typeof value === 'string') {
    if (value.includes('\u0000')) out.push(at.join('.'));
  } else if (Array.isArray(value)) {
    value.forEach((v, i) => nulPaths(v, [...at, String(i)], out));
  } else if (value !== null && typeof value === 'object') {
    for (const [k, v] of Object.entries(value)) {
      if (k.includes('\u0000')) out.push([...at, JSON.stringify(k)].join('.'));
      nulPaths(v, [...at, k], out);
    }
  }
  return out;
}

function describe(issue: z.core.$ZodIssue): string {
  if (issue.code === 'unrecognized_keys') return `unknown field${issue.keys.length > 1 ? 's' : ''} ${issue.keys.map((k) => `"${k}"`).join(', ')}`;
  if (issue.code === 'invalid_type' && issue.input === undefined) return 'is required';
  return issue.message;
}

/** Contract schemas recorded per handler, read by the OpenAPI generator. */
export interface RouteContract {
  body?: z.ZodType;
  query?: z.ZodType;
  params?: z.ZodType;
  response?: z.ZodType;
  status?: number;
  summary?: string;
}

const CONTRACT = 'lemniscate:contract';

export function routeContract(prototype: object, method: string): RouteContract {
  return (Reflect.getMetadata(CONTRACT, prototype, method) as RouteContract | undefined) ?? {};
}

function record(prototype: object, method: string | symbol | undefined, patch: Partial<RouteContract>): void {
  if (typeof method !== 'string') return;
  Reflect.defineMetadata(CONTRACT, { ...routeContract(prototype, method), ...patch }, prototype, method);
}

export function ZBody<S extends z.ZodType>(schema: S): ParameterDecorator {
  return (target, key, index) => {
    record(target, key, { body: schema });
    Body(new ZodValidationPipe(schema, 'body'))(target, key, index);
  };
}

export function ZQuery<S extends z.ZodType>(schema: S): ParameterDecorator {
  return (target, key, index) => {
    record(target, key, { query: schema });
    Query(new ZodValidationPipe(schema, 'query'))(target, key, index);
  };
}

export function ZParams<S extends z.ZodType>(schema: S): ParameterDecorator {
  return (target, key, index) => {
    record(target, key, { params: schema });
    Param(new ZodValidationPipe(schema, 'params'))(target, key, index);
  };
}

/** Declares the response contract and a one-line summary for the OpenAPI document. */
export function Returns(response: z.ZodType | null, summary: string, status = 200): MethodDecorator {
  return (target, key) => record(target, key, { ...(response ? { response } : {}), summary, status });
}
