/** Reading an SSE response body in tests. */

/** The body's blocks (events and comments), each as soon as its blank line has arrived. */
export async function* sseBlocks(res: Response): AsyncGenerator<string> {
  const decoder = new TextDecoder();
  let text = '';
  for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
    text += decoder.decode(chunk, { stream: true });
    const blocks = text.split('\n\n');
    text = blocks.pop()!;
    yield* blocks;
  }
}
