import { Controller, Get, HttpCode, Post } from '@nestjs/common';
import { CreateUserRequest, IdParams, GatewayRoutes as R, UpdateUserRequest } from '@lemniscate/contracts';
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

  @Post(':id')
  @HttpCode(200)
  @Can('update', 'User')
  @Returns(R.updateUser.response, "Change a person's role or display name (administrators; never their own role, never the last administrator's)", R.updateUser.status)
  update(@CurrentPrincipal() principal: Principal, @ZParams(R.updateUser.params) params: IdParams, @ZBody(R.updateUser.body) body: UpdateUserRequest) {
    return this.users.update(principal, params.id, body);
  }

  @Get(':id/tokens')
  @Can('manage', 'User')
  @Returns(R.listUserTokens.response, "A person's API tokens, for an administrator to review and revoke (never the secrets)", R.listUserTokens.status)
  tokens(@CurrentPrincipal() principal: Principal, @ZParams(R.listUserTokens.params) params: IdParams) {
    return this.users.tokensOf(principal, params.id);
  }

  @Post(':id/revoke')
  @Can('revoke', 'User')
  @Returns(R.revokeUser.response, 'Revoke a user: account, API tokens, console sessions and running sessions', R.revokeUser.status)
  revoke(@CurrentPrincipal() principal: Principal, @ZParams(R.revokeUser.params) params: IdParams) {
    return this.revocation.revokeUser(principal, params.id);
  }
}
