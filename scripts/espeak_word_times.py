#!/usr/bin/env python3
"""Speech and its word boundaries from espeak-ng itself: synthesizes sentences through
libespeak-ng (ctypes; the same synthesizer the espeak-ng program runs) with word and phoneme
events, writes each as a WAV at espeak-ng's rate and prints the reference word times.

Words espeak-ng speaks as one with the next ("of the") have no boundary of their own and are
left out. A word starts at its first phoneme that is not a pause and ends where the next pause phoneme or
the next word begins (the end of the sentence for the last): espeak-ng reports each phoneme's
start as a sample position of its output, so these are the synthesizer's own boundaries.

  scripts/espeak_word_times.py OUT_DIR VOICE RATE PITCH < sentences  (one per line: `utt text`)
writes OUT_DIR/<utt>.wav and prints `utt word_index start end word` lines (seconds)."""
import ctypes
import struct
import sys
import wave


class Event(ctypes.Structure):  # espeak_EVENT of speak_lib.h
    _fields_ = [("type", ctypes.c_int), ("unique_identifier", ctypes.c_uint), ("text_position", ctypes.c_int),
                ("length", ctypes.c_int), ("audio_position", ctypes.c_int), ("sample", ctypes.c_int),
                ("user_data", ctypes.c_void_p), ("id", ctypes.c_char * 8)]


EV_LIST_TERMINATED, EV_WORD, EV_END, EV_PHONEME = 0, 1, 5, 7
CALLBACK = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_short), ctypes.c_int, ctypes.POINTER(Event))


def main(out_dir, voice, rate, pitch):
    lib = ctypes.CDLL("libespeak-ng.so.1")
    samples, events = [], []

    def on_synth(wav, n, ev):
        if wav and n > 0:
            samples.extend(wav[:n])
        i = 0
        while ev[i].type != EV_LIST_TERMINATED:
            e = ev[i]
            events.append((e.type, e.sample, bytes(e.id), e.text_position))
            i += 1
        return 0

    cb = CALLBACK(on_synth)
    # AUDIO_OUTPUT_SYNCHRONOUS, options: espeakINITIALIZE_PHONEME_EVENTS
    sr = lib.espeak_Initialize(2, 0, None, 1)
    lib.espeak_SetSynthCallback(cb)
    if lib.espeak_SetVoiceByName(voice.encode()) != 0:
        sys.exit(f"espeak-ng: no voice {voice}")
    lib.espeak_SetParameter(1, int(rate), 0)   # espeakRATE
    lib.espeak_SetParameter(3, int(pitch), 0)  # espeakPITCH
    for line in sys.stdin:
        utt, _, text = line.strip().partition(" ")
        if not text:
            continue
        samples.clear(), events.clear()
        b = text.encode()
        lib.espeak_Synth(b, len(b) + 1, 0, 0, 0, 0, None, None)
        lib.espeak_Synchronize()
        with wave.open(f"{out_dir}/{utt}.wav", "wb") as w:
            w.setnchannels(1), w.setsampwidth(2), w.setframerate(sr)
            w.writeframes(struct.pack(f"<{len(samples)}h", *samples))
        words = text.split()
        at, pos = 0, []  # each word's 1-based character position, as the events count
        for w in words:
            at = text.index(w, at)
            pos.append(at + 1)
            at += len(w)
        starts = [i for i, e in enumerate(events) if e[0] == EV_WORD]
        index = [pos.index(events[i][3]) if events[i][3] in pos else -1 for i in starts]
        end_all = max([e[1] for e in events if e[0] == EV_END] + [len(samples)])
        for k, i in enumerate(starts):
            nxt = starts[k + 1] if k + 1 < len(starts) else len(events)
            # espeak-ng speaks some word pairs as one ("of the"): only words with their own event
            want_next = index[k + 1] if k + 1 < len(starts) else len(words)
            if index[k] < 0 or want_next != index[k] + 1:
                continue
            phones = [e for e in events[i + 1:nxt] if e[0] == EV_PHONEME]
            spoken = [j for j, e in enumerate(phones) if not e[2].startswith(b"_")]
            if not spoken:
                continue
            start = phones[spoken[0]][1]
            after = [e for e in phones[spoken[-1] + 1:] if e[2].startswith(b"_")]
            end = after[0][1] if after else (events[nxt][1] if nxt < len(events) else end_all)
            print(f"{utt} {index[k]} {start / sr:.4f} {end / sr:.4f} {words[index[k]]}")


if __name__ == "__main__":
    main(*sys.argv[1:5])
