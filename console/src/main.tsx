/** The console's shell: token field, navigation, and the page the hash names. */
import { render } from 'preact';
import { useEffect, useMemo, useState } from 'preact/hooks';
import { ClientContext, loadToken, makeClient, saveToken } from './api.js';
import { BucketsPage } from './buckets.js';
import { BucketPage } from './bucket.js';
import { parseHash, type Route } from './routes.js';
import { StreamPage } from './stream.js';
import './style.css';

function TokenField({ token, onChange }: { token: string; onChange: (token: string) => void }) {
  const [draft, setDraft] = useState(token);
  return (
    <form
      class="token"
      onSubmit={(e) => {
        e.preventDefault();
        onChange(draft.trim());
      }}
    >
      <label for="token">Access token</label>
      <input id="token" type="password" autoComplete="off" value={draft} onInput={(e) => setDraft(e.currentTarget.value)} />
      <button type="submit">Use token</button>
      <span class="hint">{token === '' ? 'none (open server)' : 'kept in this tab only'}</span>
    </form>
  );
}

function Page({ route }: { route: Route }) {
  switch (route.page) {
    case 'buckets':
      return <BucketsPage />;
    case 'bucket':
      return <BucketPage bucket={route.bucket} />;
    case 'stream':
      return <StreamPage path={route.path} />;
  }
}

function App() {
  const [route, setRoute] = useState(() => parseHash(location.hash));
  const [token, setToken] = useState(loadToken);
  const client = useMemo(() => makeClient(token), [token]);
  useEffect(() => {
    const onHash = () => setRoute(parseHash(location.hash));
    addEventListener('hashchange', onHash);
    return () => removeEventListener('hashchange', onHash);
  }, []);
  return (
    <ClientContext.Provider value={client}>
      <header>
        <a class="brand" href="#/">
          rill console
        </a>
        <TokenField
          token={token}
          onChange={(next) => {
            saveToken(next);
            setToken(next);
          }}
        />
      </header>
      <main>
        {/* A new client (token) remounts the page, so it reloads with the new credentials. */}
        <Page key={`${token}\u0000${location.hash}`} route={route} />
      </main>
    </ClientContext.Provider>
  );
}

render(<App />, document.getElementById('app')!);
