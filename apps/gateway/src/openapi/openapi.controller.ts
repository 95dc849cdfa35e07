import { Controller, Get } from '@nestjs/common';
import { DiscoveryService } from '@nestjs/core';
import type { Type } from '@nestjs/common';
import { Public } from '../auth/permission.decorator';
import { listRoutes, servedPath } from './routes';
import { GatewayRoutes as R } from '@lemniscate/contracts';
import { Returns } from '../common/zod-validation';
import { buildOpenApi } from './openapi';

@Controller('api/docs')
export class OpenApiController {
  private document: Record<string, unknown> | undefined;

  constructor(private readonly discovery: DiscoveryService) {}

  @Get()
  @Public('the API description is not a secret; every route it lists enforces its own permission')
  @Returns(null, 'This API as an OpenAPI 3.1 document, generated from the zod contracts', R.apiDocs.status)
  docs(): Record<string, unknown> {
    this.document ??= this.build();
    return this.document;
  }

  private build(): Record<string, unknown> {
    const controllers = this.discovery
      .getControllers()
      .map((w) => w.metatype as Type | null)
      .filter((t): t is Type => !!t);
    const routes = listRoutes(controllers).map((r) => ({ ...r, path: servedPath(r.path) }));
    return buildOpenApi(routes, '', '1');
  }
}
