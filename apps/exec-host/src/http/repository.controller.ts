import { Controller, HttpCode, Inject, Post } from '@nestjs/common';
import { RepositoryDirectoryRequest, type RepositoryDirectoryRequestParsed } from '@lemniscate/contracts';
import { EnvironmentService } from '../environment/environment.service';
import { ZBody } from './zod-pipe';

/** Reading a project's repository at its default ref, where only the exec-host can reach it (a git URL). */
@Controller('v1/repository')
export class RepositoryController {
  constructor(@Inject(EnvironmentService) private readonly environments: EnvironmentService) {}

  @Post('directory')
  @HttpCode(200)
  directory(@ZBody(RepositoryDirectoryRequest) body: RepositoryDirectoryRequestParsed) {
    return this.environments.readDirectory(body);
  }
}
