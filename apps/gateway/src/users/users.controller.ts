import { Controller, Get, Post } from '@nestjs/common';
import { CreateUserRequest, IdParams, GatewayRoutes as R } from '@lemniscate/contracts';
import { Can, CurrentPrincipal } from '../auth/permission.decorator';
import type { Principal } from '../auth/principal';
import { Returns, ZBody, ZParams } from '../common/zod-validation';
import { RevocationService } from '../sessions/revocation.service';
import { UsersService } from './users.service';

@Controller('users')
export class UsersController {
  constructor(
    private readonly users: UsersService,
    private readonly revocation: RevocationService,
  ) {}

  @Get()
  @Can('read', 'User')
  @Returns(R.listUsers.response, 'Users you may see (administrators: everyone)', R.listUsers.status)
  list(@CurrentPrincipal() principal: Principal) {
    return this.users.list(principal);
  }

  @Post()
  @Can('create', 'User')
  @Returns(R.createUser.response, 'Create a user with a role and project memberships', R.createUser.status)
  create(@CurrentPrincipal() principal: Principal, @ZBody(R.createUser.body) body: CreateUserRequest) {
    return this.users.create(principal, body);
  }

  @Get(':id')
  @Can('read', 'User')
  @Returns(R.getUser.response, 'One user', R.getUser.status)
  get(@CurrentPrincipal() principal: Principal, @ZParams(R.getUser.params) params: IdParams) {
    return this.users.get(principal, params.id);
  }

  @Post(':id/revoke')
  @Can('revoke', 'User')
  @Returns(R.revokeUser.response, 'Revoke a user: account, API tokens, console sessions and running sessions', R.revokeUser.status)
  revoke(@CurrentPrincipal() principal: Principal, @ZParams(R.revokeUser.params) params: IdParams) {
    return this.revocation.revokeUser(principal, params.id);
  }
}
