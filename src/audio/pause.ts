/**
 * Lets other work run between two bounded slices of a long encode, resample or speed change: in the encoder
 * worker, the other streams' chunks and files' slices wait for it; elsewhere it returns at once.
 */
export type Pause = () => Promise<void>;

export const NO_PAUSE: Pause = async () => undefined;
