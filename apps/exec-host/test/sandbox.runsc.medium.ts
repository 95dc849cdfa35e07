import { sandboxSuite } from './sandbox-suite';

sandboxSuite('runsc');
