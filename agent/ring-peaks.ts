/**
 * The ring's peak fill for more than one reader. The addon's ringFill() returns the peak since
 * its previous call and starts over, so the status line and a metrics scrape reading it in turn
 * would each miss the other's share; here every reader gets the peak since its own last read.
 */
export class RingPeaks {
  private readonly peaks: number[] = [];

  constructor(private readonly read: () => number) {}

  /** A reader: each call returns the peak since that reader's previous call (-1 if unknown). */
  reader(): () => number {
    const index = this.peaks.push(-1) - 1;
    return () => {
      this.fold();
      const peak = this.peaks[index]!;
      this.peaks[index] = -1;
      return peak;
    };
  }

  private fold(): void {
    const fill = this.read();
    for (let i = 0; i < this.peaks.length; i++) this.peaks[i] = Math.max(this.peaks[i]!, fill);
  }
}
