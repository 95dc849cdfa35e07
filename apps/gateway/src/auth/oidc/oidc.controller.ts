import { Controller, Get, HttpCode, Post, Res } from '@nestjs/common';
import { GatewayRoutes as R, OIDC_CALLBACK_FIELDS, type OidcCallbackQuery, type OidcCliRequest, type OidcStartQuery } from '@lemniscate/contracts';
import type { Response } from 'express';
import { Returns, ZBody, ZQuery } from '../../common/zod-validation';
import type { CookieJar } from '../auth.service';
import { ClientIp, SessionCookie } from '../session-cookie';
import { Public } from '../permission.decorator';
import { OidcService, OidcSignInError } from './oidc.service';

/** Single sign-on with the deployment's OpenID Provider (authorization code with PKCE). */
@Controller('auth/oidc')
export class OidcController {
  constructor(private readonly oidc: OidcService) {}

  @Get()
  @Public('the sign-in page asks whether single sign-on is offered before anyone is signed in')
  @Returns(R.oidcInfo.response, 'Whether single sign-on is offered, its button, and whether passwords are accepted', R.oidcInfo.status)
  info() {
    return this.oidc.info();
  }

  @Get('start')
  @HttpCode(302)
  @Public('starting a sign-in with the identity provider is how a person gets credentials')
  @Returns(null, "Redirects to the identity provider's sign-in, with this sign-in's state, nonce and PKCE challenge", R.oidcStart.status)
  async start(@ZQuery(R.oidcStart.query) query: OidcStartQuery, @Res() res: Response) {
    try {
      res.redirect(302, await this.oidc.start(query.returnTo, query.cliPort ? { port: Number(query.cliPort), challenge: query.cliChallenge! } : undefined));
    } catch (e) {
      if (!(e instanceof OidcSignInError)) throw e;
      res.redirect(302, this.signInPage(e.message));
    }
  }

  @Get('callback')
  @HttpCode(302)
  @Public("the identity provider's answer arrives here; its state, code and ID token are checked")
  @Returns(null, 'Takes the sign-in state once, exchanges the code, checks the ID token, maps the groups, opens a console session and redirects to the console', R.oidcCallback.status)
  async callback(@ZQuery(R.oidcCallback.query) query: OidcCallbackQuery, @ClientIp() ip: string, @SessionCookie() jar: CookieJar, @Res() res: Response) {
    const params = new URLSearchParams(
      OIDC_CALLBACK_FIELDS.flatMap((name): [string, string][] => {
        const value = query[name];
        return typeof value === 'string' ? [[name, value]] : [];
      }),
    );
    try {
      res.redirect(302, await this.oidc.callback(params, ip, jar));
    } catch (e) {
      if (!(e instanceof OidcSignInError)) throw e;
      // A sign-in `lemni login --sso` started: the CLI, listening on its loopback address, prints why.
      res.redirect(302, e.cliPort ? `http://127.0.0.1:${e.cliPort}/callback?error=${encodeURIComponent(e.message)}` : this.signInPage(e.message));
    }
  }

  @Post('cli')
  @HttpCode(200)
  @Public("`lemni login --sso` redeems the sign-in's one-time code with its verifier")
  @Returns(
    R.oidcCli.response,
    'Redeems the one-time code a CLI sign-in sent to its loopback address (with the verifier of its challenge): opens a session, like a password sign-in, from which the CLI makes its API token',
    R.oidcCli.status,
  )
  cli(@ZBody(R.oidcCli.body) body: OidcCliRequest, @ClientIp() ip: string, @SessionCookie() jar: CookieJar) {
    return this.oidc.cliSession(body, ip, jar);
  }

  /** The console's sign-in page, told why single sign-on did not sign the person in. */
  private signInPage(sentence: string): string {
    return `${this.oidc.enabled ? this.oidc.consoleOrigin() : ''}/sign-in?sso_error=${encodeURIComponent(sentence)}`;
  }
}
