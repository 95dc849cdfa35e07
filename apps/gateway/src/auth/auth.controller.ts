import { Controller, Delete, Get, HttpCode, Post } from '@nestjs/common';
import { ChangePasswordRequest, CreateTokenRequest, IdParams, LoginRequest, GatewayRoutes as R } from '@lemniscate/contracts';
import { AllowedWhenUnrecorded } from '../audit-sinks/audit-recording.guard';
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
  @Returns(R.login.response, 'Sign in to the console: sets the session cookie and returns the CSRF token', R.login.status)
  login(@ZBody(R.login.body) body: LoginRequest, @ClientIp() ip: string, @SessionCookie() jar: CookieJar) {
    return this.auth.login(body, ip, jar);
  }

  @Post('logout')
  @AllowedWhenUnrecorded('ending a sign-in takes a credential away; it is never refused')
  @HttpCode(200)
  @Authenticated()
  @Returns(R.logout.response, 'End this console session', R.logout.status)
  logout(@CurrentPrincipal() principal: Principal, @SessionCookie() jar: CookieJar) {
    return this.auth.logout(principal, jar);
  }

  @Get('me')
  @Authenticated()
  @Returns(R.me.response, 'Who is signed in', R.me.status)
  me(@CurrentPrincipal() principal: Principal) {
    return this.auth.me(principal);
  }

  @Post('password')
  @HttpCode(200)
  @Authenticated()
  @Returns(R.changePassword.response, 'Change your password (ends your console sessions)', R.changePassword.status)
  changePassword(@CurrentPrincipal() principal: Principal, @ZBody(R.changePassword.body) body: ChangePasswordRequest) {
    return this.auth.changePassword(principal, body);
  }

  @Post('tokens')
  @Can('create', 'Token')
  @Returns(R.createToken.response, 'Create a personal API token; the secret is shown in this response only', R.createToken.status)
  createToken(@CurrentPrincipal() principal: Principal, @ZBody(R.createToken.body) body: CreateTokenRequest) {
    return this.auth.createToken(principal, body);
  }

  @Get('tokens')
  @Can('read', 'Token')
  @Returns(R.listTokens.response, 'Your API tokens (never their secrets)', R.listTokens.status)
  listTokens(@CurrentPrincipal() principal: Principal) {
    return this.auth.listTokens(principal);
  }

  @Delete('tokens/:id')
  @Can('revoke', 'Token')
  @Returns(R.revokeToken.response, 'Revoke one of your API tokens', R.revokeToken.status)
  revokeToken(@CurrentPrincipal() principal: Principal, @ZParams(R.revokeToken.params) params: IdParams) {
    return this.auth.revokeToken(principal, params.id);
  }
}
