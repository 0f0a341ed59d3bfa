import { useCallback, useEffect, useState } from 'preact/hooks';
import { api } from './api.ts';

/** Loads an API answer, with a reload for after changes. */
export function useApi<T>(method: string, args: Record<string, unknown>, deps: unknown[] = []) {
  const [data, setData] = useState<T | null>(null);
  const [error, setError] = useState<string | null>(null);
  const load = useCallback(async () => {
    try {
      setData(await api<T>(method, args));
      setError(null);
    } catch (err) {
      setError((err as Error).message);
    }
  }, [method, JSON.stringify(args), ...deps]);
  useEffect(() => {
    void load();
  }, [load]);
  return { data, error, reload: load };
}

/** Runs an action, keeping its error for display. */
export function useAction() {
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const run = async <T>(fn: () => Promise<T>): Promise<T | undefined> => {
    setBusy(true);
    setError(null);
    try {
      return await fn();
    } catch (err) {
      setError((err as Error).message);
      return undefined;
    } finally {
      setBusy(false);
    }
  };
  return { error, busy, run };
}

/** The hash route: #/projects/3 → ['projects', '3']. */
export function useRoute(): string[] {
  const read = () => location.hash.replace(/^#\/?/, '').split('/').filter(Boolean);
  const [route, setRoute] = useState(read);
  useEffect(() => {
    const on = () => setRoute(read());
    addEventListener('hashchange', on);
    return () => removeEventListener('hashchange', on);
  }, []);
  return route;
}
