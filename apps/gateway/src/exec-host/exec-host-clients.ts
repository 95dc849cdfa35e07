import { Inject, Injectable } from '@nestjs/common';
import { GATEWAY_CONFIG, type GatewayConfig } from '../config/config';
import type { ExecHostPort } from './exec-host.port';
import { HttpExecHost } from './http-exec-host';

/**
 * The gateway's clients of exec-hosts, one per address: the bearer token on every call and, when the
 * gateway has its certificate (LEMNISCATE_EXEC_HOST_CLIENT_CERT…), mutual TLS.
 */
@Injectable()
export class ExecHostClients {
  private readonly clients = new Map<string, ExecHostPort>();

  constructor(@Inject(GATEWAY_CONFIG) private readonly config: GatewayConfig) {}

  for(address: string): ExecHostPort {
    let client = this.clients.get(address);
    if (!client) {
      client = this.fresh(address);
      this.clients.set(address, client);
    }
    return client;
  }

  /** A client that shares no connection with any other (a registration's check of a new address). */
  fresh(address: string): ExecHostPort {
    return new HttpExecHost({ url: address.replace(/\/+$/, ''), token: this.config.execHost.token });
  }
}
