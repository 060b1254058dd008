/** What a node may be called: it names the store file (<node>.db) and appears in every event. */
export const NODE_NAME = /^[A-Za-z0-9._-]{1,64}$/;
export const NODE_NAME_RULE = 'letters, digits, ".", "_" or "-", at most 64';
