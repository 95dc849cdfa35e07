import { Controller, Delete, Get, HttpCode, Inject, Param, Post, Query, Req, Res } from '@nestjs/common';
import {
  ApplyDiffRequest,
  ChangePathsRequest,
  CreateSandboxRequest,
  ExecRequest,
  ListFilesRequest,
  McpMessageRequest,
  McpOpenRequest,
  ProposeEditRequest,
  ProposeWriteRequest,
  ReadFileRequest,
  SearchFilesRequest,
  type CreateSandboxRequestParsed,
  type ExecExit,
  type ExecStreamChunk,
} from '@lemniscate/contracts';
import type { Request, Response } from 'express';
import type { z } from 'zod';
import { ExecHostError } from '../errors';
import { setSpanAttributes, tracingEnabled, withSpan } from '@lemniscate/telemetry';
import { ExecHostMetrics, execOutcome } from '../metrics';
import { SandboxService } from '../sandbox.service';
import { ZBody } from './zod-pipe';

const seconds = (since: bigint) => Number(process.hrtime.bigint() - since) / 1e9;

@Controller('v1')
export class SandboxesController {
  constructor(
    @Inject(SandboxService) private readonly sandboxes: SandboxService,
    @Inject(ExecHostMetrics) private readonly metrics: ExecHostMetrics,
  ) {}

  @Get('health')
  health() {
    return this.sandboxes.health();
  }

  @Post('sandboxes')
  async create(@ZBody(CreateSandboxRequest) body: CreateSandboxRequestParsed) {
    const started = process.hrtime.bigint();
    try {
      const info = await this.sandboxes.create(body);
      this.metrics.observeCreate(seconds(started), 'ok');
      return info;
    } catch (e) {
      this.metrics.observeCreate(seconds(started), e instanceof ExecHostError ? e.code : 'error');
      throw e;
    }
  }

  @Get('sandboxes')
  list() {
    return { sandboxes: this.sandboxes.list() };
  }

  @Get('sandboxes/:id')
  get(@Param('id') id: string) {
    return this.sandboxes.get(id);
  }

  @Delete('sandboxes/:id')
  destroy(@Param('id') id: string) {
    return this.sandboxes.destroy(id);
  }

  /** NDJSON stream of output chunks and one exit line; `?stream=false` answers one JSON object at the end. */
  @Post('sandboxes/:id/exec')
  async exec(@Param('id') id: string, @ZBody(ExecRequest) body: z.infer<typeof ExecRequest>, @Query('stream') stream: string | undefined, @Req() req: Request, @Res() res: Response) {
    const gone = new AbortController();
    res.on('close', () => {
      if (!res.writableFinished) gone.abort();
    });
    const started = process.hrtime.bigint();
    let exit: Omit<ExecExit, 'type'> | null = null;
    try {
      // T3: the sandbox command's span, a child of the gateway's call (its W3C trace context); the
      // command's text stays out of it (it may quote a secret), its exit status goes in.
      // The sandbox's view is built for the span only when spans are recorded (this is every command's path).
      exit = await withSpan('sandbox.exec', { attributes: tracingEnabled() ? this.sandboxAttributes(id) : {} }, async () => {
        const done = await this.execTo(id, body, stream, res, gone.signal);
        setSpanAttributes({
          'process.exit.code': done.exitCode ?? -1,
          'lemniscate.exec.duration_ms': done.durationMs,
          'lemniscate.exec.timed_out': done.timedOut,
          ...(done.class ? { 'lemniscate.exec.class': done.class } : {}),
        });
        return done;
      });
    } finally {
      // A refusal before the command ran (unknown sandbox, busy) is not a command's latency.
      if (exit || gone.signal.aborted) this.metrics.observeExec(seconds(started), execOutcome(exit));
    }
    void req;
  }

  private sandboxAttributes(id: string): Record<string, string> {
    try {
      const info = this.sandboxes.get(id);
      return { 'lemniscate.sandbox.id': id, 'lemniscate.session.id': info.sessionId, 'lemniscate.sandbox.runtime': info.runtime };
    } catch {
      return { 'lemniscate.sandbox.id': id };
    }
  }

  private async execTo(id: string, body: z.infer<typeof ExecRequest>, stream: string | undefined, res: Response, signal: AbortSignal): Promise<Omit<ExecExit, 'type'>> {
    if (stream === 'false' || stream === '0') {
      const out = { stdout: '', stderr: '' };
      const exit = await this.sandboxes.exec(id, body, { onOutput: (s, text) => (out[s] += text) }, signal);
      res.status(200).json({ ...exit, ...out });
      return exit;
    }
    let started = false;
    const write = (chunk: ExecStreamChunk) => {
      if (!started) {
        res.status(200).setHeader('content-type', 'application/x-ndjson; charset=utf-8');
        res.setHeader('cache-control', 'no-store');
        started = true;
      }
      res.write(`${JSON.stringify(chunk)}\n`);
    };
    const exit = await this.sandboxes.exec(id, body, { onOutput: (type, data) => write({ type, data }) }, signal);
    write({ type: 'exit', ...exit });
    res.end();
    return exit;
  }

  @Post('sandboxes/:id/files/read')
  @HttpCode(200)
  read(@Param('id') id: string, @ZBody(ReadFileRequest) body: z.infer<typeof ReadFileRequest>) {
    return this.sandboxes.read(id, body.path, body.offset, body.limit);
  }

  @Post('sandboxes/:id/files/list')
  @HttpCode(200)
  listFiles(@Param('id') id: string, @ZBody(ListFilesRequest) body: z.output<typeof ListFilesRequest>) {
    return this.sandboxes.listFiles(id, body.path);
  }

  @Post('sandboxes/:id/files/search')
  @HttpCode(200)
  search(@Param('id') id: string, @ZBody(SearchFilesRequest) body: z.output<typeof SearchFilesRequest>) {
    return this.sandboxes.search(id, body.pattern, body.path, body.regex, body.caseSensitive, body.maxMatches);
  }

  @Post('sandboxes/:id/files/propose-write')
  @HttpCode(200)
  proposeWrite(@Param('id') id: string, @ZBody(ProposeWriteRequest) body: z.infer<typeof ProposeWriteRequest>) {
    return this.sandboxes.proposeWrite(id, body.path, body.content);
  }

  @Post('sandboxes/:id/files/propose-edit')
  @HttpCode(200)
  proposeEdit(@Param('id') id: string, @ZBody(ProposeEditRequest) body: z.infer<typeof ProposeEditRequest>) {
    return this.sandboxes.proposeEdit(id, body.path, body.old_string, body.new_string);
  }

  @Post('sandboxes/:id/files/apply')
  @HttpCode(200)
  apply(@Param('id') id: string, @ZBody(ApplyDiffRequest) body: z.infer<typeof ApplyDiffRequest>) {
    return this.sandboxes.apply(id, body.diff);
  }

  @Get('sandboxes/:id/changes')
  changes(@Param('id') id: string) {
    return this.sandboxes.changes(id);
  }

  @Post('sandboxes/:id/changes/accept')
  @HttpCode(200)
  accept(@Param('id') id: string, @ZBody(ChangePathsRequest) body: z.infer<typeof ChangePathsRequest>) {
    return this.sandboxes.accept(id, body.paths);
  }

  @Post('sandboxes/:id/changes/revert')
  @HttpCode(200)
  revert(@Param('id') id: string, @ZBody(ChangePathsRequest) body: z.infer<typeof ChangePathsRequest>) {
    return this.sandboxes.revert(id, body.paths);
  }

  /** AG7: starts a local MCP server in the sandbox (a command with stdin; see McpRelay). */
  @Post('sandboxes/:id/mcp')
  @HttpCode(201)
  mcpOpen(@Param('id') id: string, @ZBody(McpOpenRequest) body: z.infer<typeof McpOpenRequest>) {
    return this.sandboxes.mcp.open(id, body);
  }

  @Post('sandboxes/:id/mcp/:processId/messages')
  @HttpCode(200)
  mcpMessages(@Param('id') id: string, @Param('processId') processId: string, @ZBody(McpMessageRequest) body: z.infer<typeof McpMessageRequest>) {
    // An unknown sandbox is said as such, before any process is looked for.
    this.sandboxes.get(id);
    return this.sandboxes.mcp.exchange(id, processId, body.message, body.waitFor);
  }

  /** Closes the server's stdin, waits a moment for it to end, kills it otherwise; answers how it ended. */
  @Delete('sandboxes/:id/mcp/:processId')
  mcpClose(@Param('id') id: string, @Param('processId') processId: string) {
    this.sandboxes.get(id);
    return this.sandboxes.mcp.close(id, processId);
  }

  @Get('sandboxes/:id/patch')
  patch(@Param('id') id: string) {
    return this.sandboxes.patch(id);
  }
}

/** Liveness for process supervisors and the gateway's readiness check; the full report is /v1/health. */
@Controller()
export class LivenessController {
  constructor(@Inject(ExecHostMetrics) private readonly metrics: ExecHostMetrics) {}

  @Get('healthz')
  healthz() {
    return { status: 'ok' };
  }

  /** Prometheus text; behind the same client certificate and token as every route. */
  @Get('metrics')
  async prometheus(@Res() res: Response) {
    res.status(200).setHeader('content-type', this.metrics.contentType);
    res.setHeader('cache-control', 'no-store');
    res.end(await this.metrics.text());
  }
}
