import { Controller, Get, Post } from '@nestjs/common';
import { CreateUserRequest, IdParams, RevokeUserResponse, UserView } from '@lemniscate/contracts';
import { z } from 'zod';
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
  @Returns(z.array(UserView), 'Users you may see (administrators: everyone)')
  list(@CurrentPrincipal() principal: Principal) {
    return this.users.list(principal);
  }

  @Post()
  @Can('create', 'User')
  @Returns(UserView, 'Create a user with a role and project memberships', 201)
  create(@CurrentPrincipal() principal: Principal, @ZBody(CreateUserRequest) body: CreateUserRequest) {
    return this.users.create(principal, body);
  }

  @Get(':id')
  @Can('read', 'User')
  @Returns(UserView, 'One user')
  get(@CurrentPrincipal() principal: Principal, @ZParams(IdParams) params: IdParams) {
    return this.users.get(principal, params.id);
  }

  @Post(':id/revoke')
  @Can('revoke', 'User')
  @Returns(RevokeUserResponse, 'Revoke a user: account, API tokens, console sessions and running sessions', 201)
  revoke(@CurrentPrincipal() principal: Principal, @ZParams(IdParams) params: IdParams) {
    return this.revocation.revokeUser(principal, params.id);
  }
}
