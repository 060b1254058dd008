/** Where a replay session is: its API resource and the web page's deep link that follows it. */
export function sessionLinks(
  server: string,
  id: string,
  transactionId: string,
): { api: string; web: string } {
  return {
    api: `${server}/api/replay/sessions/${id}`,
    web: `${server}/#/txn/${encodeURIComponent(transactionId)}?session=${id}`,
  };
}
