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
    const result = this.schema.safeParse(value ?? (this.part === 'body' ? undefined : {}));
    if (result.success) return result.data;
    const issues = result.error.issues.map((i) => ({ path: [this.part, ...i.path.map(String)].join('.'), message: describe(i) }));
    const summary = issues.map((i) => `${i.path}: ${i.message}`).join('; ');
    throw new AppError(ErrorCode.ValidationFailed, `The request is invalid: ${summary}.`, { issues });
  }
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
