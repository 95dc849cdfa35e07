import { sandboxSuite } from './sandbox-suite';

sandboxSuite('runc');
