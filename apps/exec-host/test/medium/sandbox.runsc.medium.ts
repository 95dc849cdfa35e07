import { sandboxSuite } from '../support/sandbox-suite';

sandboxSuite('runsc');
