import { sandboxSuite } from '../support/sandbox-suite';

sandboxSuite('runc');
