import { createRoot } from 'react-dom/client';
import validate from 'virtual:policy-validator';
const el = document.getElementById('root')!;
createRoot(el).render(<p>{String(validate({ version: 1 }))}</p>);
