import { execFile } from 'node:child_process';
import * as fs from 'node:fs';
import { promisify } from 'node:util';

const run = promisify(execFile);
const APPARMOR_PROFILE_NAME = 'lemniscate-sandbox';

export interface AppArmorState {
  state: 'enforced' | 'unavailable' | 'failed';
  profile: string;
  message?: string;
}

function kernelHasAppArmor(sysModule = '/sys/module/apparmor'): boolean {
  try {
    return fs.readFileSync(`${sysModule}/parameters/enabled`, 'utf8').trim() === 'Y';
  } catch {
    return false;
  }
}

/**
 * Loads the sandbox's AppArmor profile where the kernel has AppArmor. Without it the exec-host still
 * runs (seccomp, capabilities and the runtime still confine the sandbox) and says so.
 */
export async function ensureAppArmor(profilePath: string): Promise<AppArmorState> {
  if (!kernelHasAppArmor()) {
    return { state: 'unavailable', profile: APPARMOR_PROFILE_NAME, message: 'The host kernel has no AppArmor; sandboxes run without the AppArmor profile.' };
  }
  try {
    await run('apparmor_parser', ['-r', '-W', profilePath], { timeout: 30_000 });
    return { state: 'enforced', profile: APPARMOR_PROFILE_NAME };
  } catch (e) {
    return { state: 'failed', profile: APPARMOR_PROFILE_NAME, message: `The AppArmor profile ${profilePath} could not be loaded: ${(e as Error).message.split('\n')[0]}` };
  }
}
