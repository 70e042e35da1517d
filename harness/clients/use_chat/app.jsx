// A minimal chat page on @ai-sdk/react's useChat, bundled offline by esbuild (use_chat.mjs):
// messages rendered from their parts, and an Approve / Deny pair for a tool call that asks.
import React, { useState } from 'react';
import { createRoot } from 'react-dom/client';
import { useChat } from '@ai-sdk/react';
import { DefaultChatTransport, lastAssistantMessageIsCompleteWithApprovalResponses } from 'ai';

function Part({ part, onApproval }) {
  if (part.type === 'text') return <p className="text">{part.text}</p>;
  if (part.type.startsWith('tool-')) {
    return (
      <div className="tool" data-state={part.state}>
        <code>{part.type.slice(5)}({JSON.stringify(part.input)})</code>
        {part.state === 'approval-requested' && (
          <>
            <button id="approve" onClick={() => onApproval(part.approval.id, true)}>Approve</button>
            <button id="deny" onClick={() => onApproval(part.approval.id, false)}>Deny</button>
          </>
        )}
        {part.state === 'output-available' && <span className="output">{String(part.output)}</span>}
      </div>
    );
  }
  return null;
}

function App() {
  const { messages, sendMessage, status, error, addToolApprovalResponse } = useChat({
    transport: new DefaultChatTransport({ api: '/api/chat' }),
    sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses,
  });
  const [input, setInput] = useState('');
  const onApproval = (id, approved) => addToolApprovalResponse({ id, approved });
  return (
    <main>
      {messages.map((m) => (
        <section key={m.id} className={`message ${m.role}`}>
          {m.parts.map((p, i) => <Part key={i} part={p} onApproval={onApproval} />)}
        </section>
      ))}
      <form onSubmit={(e) => { e.preventDefault(); sendMessage({ text: input }); setInput(''); }}>
        <input id="input" value={input} onChange={(e) => setInput(e.target.value)} />
        <button id="send" type="submit">Send</button>
      </form>
      <div id="status">{status}</div>
      {error && <div id="error">{String(error.message)}</div>}
      <pre id="messages" hidden>{JSON.stringify(messages)}</pre>
    </main>
  );
}

createRoot(document.getElementById('root')).render(<App />);
