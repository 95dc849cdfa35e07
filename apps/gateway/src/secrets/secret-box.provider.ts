import { Logger, type Provider } from '@nestjs/common';
import { GATEWAY_CONFIG, type GatewayConfig } from '../config/config';
import { loadSecretKey, SECRET_BOX, SecretBox } from './secret-box';

/** The SecretBox under the configured key; a key file made on first start is said once in the log. */
export const secretBoxProvider: Provider = {
  provide: SECRET_BOX,
  inject: [GATEWAY_CONFIG],
  useFactory: (config: GatewayConfig) => {
    const { key, created } = loadSecretKey(config.secretKey);
    if (created && config.secretKey.kind === 'file') {
      new Logger('Secrets').warn(
        `Made a new secret key in ${config.secretKey.path} (it seals repository credentials). Back it up with the database; every gateway of one database needs the same key (LEMNISCATE_SECRET_KEY or LEMNISCATE_SECRET_KEY_FILE).`,
      );
    }
    return new SecretBox(key);
  },
};
