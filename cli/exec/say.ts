/** What `kreplay replay --exec` tells the user runs on stderr, a line each, after `kreplay: `. */
export const sayLine = (text: string): string => `kreplay: ${text}\n`;

export const say = (text: string): void => {
  process.stderr.write(sayLine(text));
};
