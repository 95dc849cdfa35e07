import { Controller, Delete, Get, HttpCode, Post } from '@nestjs/common';
import { ChangePasswordRequest, CreatedToken, CreateTokenRequest, IdParams, LoginRequest, LoginResponse, MeResponse, OkResponse, TokenView } from '@lemniscate/contracts';
import { z } from 'zod';
import { Returns, ZBody, ZParams } from '../common/zod-validation';
import { AuthService, type CookieJar } from './auth.service';
import { Authenticated, Can, CurrentPrincipal, Public } from './permission.decorator';
import type { Principal } from './principal';
import { ClientIp, SessionCookie } from './session-cookie';

@Controller('auth')
export class AuthController {
  constructor(private readonly auth: AuthService) {}

  @Post('login')
  @HttpCode(200)
  @Public('signing in is how a person gets credentials')
  @Returns(LoginResponse, 'Sign in to the console: sets the session cookie and returns the CSRF token')
  login(@ZBody(LoginRequest) body: LoginRequest, @ClientIp() ip: string, @SessionCookie() jar: CookieJar) {
    return this.auth.login(body, ip, jar);
  }

  @Post('logout')
  @HttpCode(200)
  @Authenticated()
  @Returns(OkResponse, 'End this console session')
  logout(@CurrentPrincipal() principal: Principal, @SessionCookie() jar: CookieJar) {
    return this.auth.logout(principal, jar);
  }

  @Get('me')
  @Authenticated()
  @Returns(MeResponse, 'Who is signed in')
  me(@CurrentPrincipal() principal: Principal) {
    return this.auth.me(principal);
  }

  @Post('password')
  @HttpCode(200)
  @Authenticated()
  @Returns(OkResponse, 'Change your password (ends your console sessions)')
  changePassword(@CurrentPrincipal() principal: Principal, @ZBody(ChangePasswordRequest) body: ChangePasswordRequest) {
    return this.auth.changePassword(principal, body);
  }

  @Post('tokens')
  @Can('create', 'Token')
  @Returns(CreatedToken, 'Create a personal API token; the secret is shown in this response only', 201)
  createToken(@CurrentPrincipal() principal: Principal, @ZBody(CreateTokenRequest) body: CreateTokenRequest) {
    return this.auth.createToken(principal, body);
  }

  @Get('tokens')
  @Can('read', 'Token')
  @Returns(z.array(TokenView), 'Your API tokens (never their secrets)')
  listTokens(@CurrentPrincipal() principal: Principal) {
    return this.auth.listTokens(principal);
  }

  @Delete('tokens/:id')
  @Can('revoke', 'Token')
  @Returns(TokenView, 'Revoke one of your API tokens')
  revokeToken(@CurrentPrincipal() principal: Principal, @ZParams(IdParams) params: IdParams) {
    return this.auth.revokeToken(principal, params.id);
  }
}
