import { Body, PipeTransform } from '@nestjs/common';
import type { z } from 'zod';
import { ExecHostError } from '../errors';

/** Validates a request body against its contract; a failure is a 400 that names each bad field. */
class ZodBodyPipe<S extends z.ZodType> implements PipeTransform<unknown, z.infer<S>> {
  constructor(private readonly schema: S) {}

  transform(value: unknown): z.infer<S> {
    const result = this.schema.safeParse(value);
    if (result.success) return result.data;
    const issues = result.error.issues.map((i) => {
      const field = i.path.length > 0 ? i.path.map(String).join('.') : 'body';
      const message = i.code === 'invalid_type' && i.input === undefined ? 'is required' : i.message;
      return { field, message };
    });
    throw new ExecHostError('invalid_request', `The request is invalid: ${issues.map((i) => `${i.field} ${i.message}`).join('; ')}.`, { issues });
  }
}

export const ZBody = <S extends z.ZodType>(schema: S) => Body(new ZodBodyPipe(schema));
