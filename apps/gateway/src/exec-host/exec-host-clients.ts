import { Inject, Injectable, type OnApplicationShutdown } from '@nestjs/common';
import { GATEWAY_CONFIG, type GatewayConfig } from '../config/config';
import { HttpExecHost } from './http-exec-host';

/**
 * The gateway's clients of exec-hosts, one per address: the bearer token on every call and, when the
 * gateway has its certificate (LEMNISCATE_EXEC_HOST_CLIENT_CERT…), mutual TLS.
 */
@Injectable()
export class ExecHostClients implements OnApplicationShutdown {
  private readonly clients = new Map<string, HttpExecHost>();

  constructor(@Inject(GATEWAY_CONFIG) private readonly config: GatewayConfig) {}

  for(address: string): HttpExecHost {
    let client = this.clients.get(address);
    if (!client) {
      client = this.fresh(address);
      this.clients.set(address, client);
    }
    return client;
  }

  onApplicationShutdown(): void {
    for (const client of this.clients.values()) client.close();
    this.clients.clear();
  }

  /** A client that shares no connection with any other (a registration's check of a new address). */
  fresh(address: string): HttpExecHost {
    const url = address.replace(/\/+$/, '');
    return new HttpExecHost({ url, token: this.config.execHost.token, tls: url.startsWith('https:') ? this.config.execHost.tls : null });
  }
}
