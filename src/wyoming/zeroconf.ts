/**
 * The zeroconf announcement of the Wyoming listener (--wyoming-zeroconf): a `_wyoming._tcp` service over
 * mDNS/DNS-SD (RFC 6762, 6763), which Home Assistant's Wyoming integration discovers and offers to add.
 * @homebridge/ciao does the probing, answering and goodbyes; it is loaded only when the announcement is asked
 * for, since it installs source-map-support on import.
 *
 * Discovery is a convenience: where multicast is unavailable (a container without host networking, no
 * interface up) the failure is logged and the server serves as before, added in Home Assistant by host
 * and port instead.
 */
import type { Logger } from "../log/logger.ts";

/** The instance name; a second server of the same name on the network is renamed by the probe ("voxedge (2)"). */
export const ZEROCONF_INSTANCE_NAME = "voxedge";
/** Probing takes about a second (RFC 6762 §8.1: three probes 250 ms apart, then announcements); past this it is given up. */
const ADVERTISE_TIMEOUT_MS = 15_000;

export interface ZeroconfAnnouncement {
  /** Sends the goodbye packets and frees the multicast sockets. */
  stop(): Promise<void>;
}

const NOT_ANNOUNCED: ZeroconfAnnouncement = { stop: async () => {} };

/** Announces `port` on the interfaces `host` listens on (all of them for 0.0.0.0 or ::). Never rejects. */
export async function announceWyoming(port: number, host: string, logger: Logger): Promise<ZeroconfAnnouncement> {
  let release = async () => {};
  try {
    const { getResponder } = await import("@homebridge/ciao");
    const everyInterface = host === "0.0.0.0" || host === "::";
    const responder = getResponder();
    const service = responder.createService({ name: ZEROCONF_INSTANCE_NAME, type: "wyoming", port, ...(everyInterface ? {} : { restrictedAddresses: [host] }) });
    release = async () => {
      await service.destroy();
      await responder.shutdown();
    };
    let timer: ReturnType<typeof setTimeout> | undefined;
    const timedOut = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`no answer to probing within ${ADVERTISE_TIMEOUT_MS} ms`)), ADVERTISE_TIMEOUT_MS);
    });
    try {
      await Promise.race([service.advertise(), timedOut]);
    } finally {
      clearTimeout(timer);
    }
    logger.info("wyoming announced over zeroconf", { service: "_wyoming._tcp", name: service.getFQDN(), port });
    return { stop: release };
  } catch (error) {
    logger.warn("wyoming zeroconf announcement failed; add the server in Home Assistant by host and port", { error: error instanceof Error ? error.message : String(error) });
    await release().catch(() => undefined);
    return NOT_ANNOUNCED;
  }
}
