import { Controller, Get, HttpCode, Res } from '@nestjs/common';
import { GatewayRoutes as R, OIDC_CALLBACK_FIELDS, type OidcCallbackQuery, type OidcStartQuery } from '@lemniscate/contracts';
import type { Response } from 'express';
import { Returns, ZQuery } from '../../common/zod-validation';
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
      res.redirect(302, await this.oidc.start(query.returnTo));
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
      res.redirect(302, this.signInPage(e.message));
    }
  }

  /** The console's sign-in page, told why single sign-on did not sign the person in. */
  private signInPage(sentence: string): string {
    return `${this.oidc.enabled ? this.oidc.consoleOrigin() : ''}/sign-in?sso_error=${encodeURIComponent(sentence)}`;
  }
}
