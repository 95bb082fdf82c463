// llvm-mca's total cycles per code region for many regions in one process (pytest_rvv/measure/mca_driver.py).
// For scalar regions only: no LLVM-MCA instrument comments and no vector instructions (those stay with llvm-mca).
// Usage: mca_regions CPU FILE ITERATIONS... (FILE "-": standard input); prints "NAME CYCLES..." per region; exits 1 on any parse or lowering
// error (the caller then hands the regions to llvm-mca, which drops and counts unparsable lines).
#include "llvm/MC/MCAsmInfo.h"
#include "llvm/MC/MCContext.h"
#include "llvm/MC/MCInstrAnalysis.h"
#include "llvm/MC/MCInstrInfo.h"
#include "llvm/MC/MCInstPrinter.h"
#include "llvm/MC/MCObjectFileInfo.h"
#include "llvm/MC/MCParser/AsmLexer.h"
#include "llvm/MC/MCParser/MCAsmParser.h"
#include "llvm/MC/MCParser/MCTargetAsmParser.h"
#include "llvm/MC/MCRegisterInfo.h"
#include "llvm/MC/MCStreamer.h"
#include "llvm/MC/MCSubtargetInfo.h"
#include "llvm/MC/MCTargetOptions.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/MCA/Context.h"
#include "llvm/MCA/CustomBehaviour.h"
#include "llvm/MCA/InstrBuilder.h"
#include "llvm/MCA/Pipeline.h"
#include "llvm/MCA/SourceMgr.h"
#include "llvm/Support/FormattedStream.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"
#include <cstdio>
#include <string>
#include <vector>

extern "C" void LLVMInitializeRISCVTargetInfo();
extern "C" void LLVMInitializeRISCVTargetMC();
extern "C" void LLVMInitializeRISCVAsmParser();
extern "C" void LLVMInitializeRISCVTargetMCA();

using namespace llvm;

struct Collect final : MCStreamer {
  std::vector<MCInst> &Out;
  Collect(MCContext &C, std::vector<MCInst> &O) : MCStreamer(C), Out(O) {}
  void emitInstruction(const MCInst &I, const MCSubtargetInfo &) override { Out.push_back(I); }
  bool emitSymbolAttribute(MCSymbol *, MCSymbolAttr) override { return true; }
  void emitCommonSymbol(MCSymbol *, uint64_t, Align) override {}
  void emitZerofill(MCSection *, MCSymbol *, uint64_t, Align, SMLoc) override {}
};

struct Marks final : AsmCommentConsumer {
  std::vector<std::pair<const char *, std::string>> Begins;
  std::vector<const char *> Ends;
  void HandleComment(SMLoc Loc, StringRef Text) override {
    StringRef C = Text.ltrim(" \t");
    if (C.consume_front("LLVM-MCA-BEGIN")) Begins.push_back({Loc.getPointer(), C.trim(" \t").str()});
    else if (C.consume_front("LLVM-MCA-END")) Ends.push_back(Loc.getPointer());
  }
};

int main(int argc, char **argv) {
  if (argc < 4) { fprintf(stderr, "usage: mca_regions CPU FILE ITERATIONS...\n"); return 2; }
  LLVMInitializeRISCVTargetInfo(); LLVMInitializeRISCVTargetMC(); LLVMInitializeRISCVAsmParser();
  LLVMInitializeRISCVTargetMCA();
  Triple TT("riscv64");
  std::string Err;
  const Target *T = TargetRegistry::lookupTarget(TT, Err);
  if (!T) { fprintf(stderr, "%s\n", Err.c_str()); return 1; }
  std::unique_ptr<MCSubtargetInfo> STI(T->createMCSubtargetInfo(TT, argv[1], ""));
  if (!STI || !STI->isCPUStringValid(argv[1]) || !STI->getSchedModel().hasInstrSchedModel()) return 1;
  std::unique_ptr<MCRegisterInfo> MRI(T->createMCRegInfo(TT));
  MCTargetOptions MCOptions;
  std::unique_ptr<MCAsmInfo> MAI(T->createMCAsmInfo(*MRI, TT, MCOptions));
  std::unique_ptr<MCInstrInfo> MCII(T->createMCInstrInfo());
  std::unique_ptr<MCInstrAnalysis> MCIA(T->createMCInstrAnalysis(MCII.get()));
  auto Buf = MemoryBuffer::getFileOrSTDIN(argv[2]);
  if (!Buf) { fprintf(stderr, "cannot read %s\n", argv[2]); return 1; }
  SourceMgr SrcMgr;
  SrcMgr.AddNewSourceBuffer(std::move(*Buf), SMLoc());
  MCContext Ctx(TT, MAI.get(), MRI.get(), STI.get(), &SrcMgr);
  std::unique_ptr<MCObjectFileInfo> MOFI(T->createMCObjectFileInfo(Ctx, false));
  Ctx.setObjectFileInfo(MOFI.get());
  std::vector<MCInst> Insts;
  Collect Str(Ctx, Insts);
  std::unique_ptr<MCInstPrinter> IP(T->createMCInstPrinter(TT, 0, *MAI, *MCII, *MRI));
  formatted_raw_ostream FOS(nulls());
  T->createAsmTargetStreamer(Str, FOS, IP.get());
  std::unique_ptr<MCAsmParser> Parser(createMCAsmParser(SrcMgr, Ctx, Str, *MAI));
  Marks M;
  Parser->getLexer().setCommentConsumer(&M);
  Parser->getLexer().setLexMasmIntegers(true);
  MCTargetOptions Opts;
  Opts.PreserveAsmComments = false;
  std::unique_ptr<MCTargetAsmParser> TAP(T->createMCAsmParser(*STI, *Parser, *MCII, Opts));
  Parser->setTargetParser(*TAP);
  if (Parser->Run(false)) { fprintf(stderr, "parse failed\n"); return 1; }
  if (M.Begins.size() != M.Ends.size()) { fprintf(stderr, "unbalanced regions\n"); return 1; }

  std::unique_ptr<mca::InstrumentManager> IM(T->createInstrumentManager(*STI, *MCII));
  if (!IM) IM = std::make_unique<mca::InstrumentManager>(*STI, *MCII);
  std::unique_ptr<mca::InstrPostProcess> IPP(T->createInstrPostProcess(*STI, *MCII));
  if (!IPP) IPP = std::make_unique<mca::InstrPostProcess>(*STI, *MCII);
  mca::InstrBuilder IB(*STI, *MCII, *MRI, MCIA.get(), *IM, 100);
  mca::Context MCA(*MRI, *STI);
  mca::PipelineOptions PO(0, 0, 0, 0, 0, 0, true, false);
  size_t next = 0;
  const SmallVector<mca::Instrument *> None;
  for (size_t r = 0; r < M.Begins.size(); r++) {
    const char *lo = M.Begins[r].first, *hi = M.Ends[r];
    while (next < Insts.size() && Insts[next].getLoc().getPointer() < lo) next++;
    size_t first = next;
    while (next < Insts.size() && Insts[next].getLoc().getPointer() < hi) next++;
    printf("%s", M.Begins[r].second.c_str());
    for (int a = 3; a < argc; a++) {
      IB.clear();
      IPP->resetState();
      SmallVector<std::unique_ptr<mca::Instruction>> Seq;
      for (size_t i = first; i < next; i++) {
        auto I = IB.createInstruction(Insts[i], None);
        if (!I) { consumeError(I.takeError()); fprintf(stderr, "lowering failed in %s\n", M.Begins[r].second.c_str()); return 1; }
        IPP->postProcessInstruction(*I.get(), Insts[i]);
        Seq.emplace_back(std::move(I.get()));
      }
      mca::CircularSourceMgr S(Seq, (unsigned)atoi(argv[a]));
      std::unique_ptr<mca::CustomBehaviour> CB(T->createCustomBehaviour(*STI, S, *MCII));
      if (!CB) CB = std::make_unique<mca::CustomBehaviour>(*STI, S, *MCII);
      auto P = MCA.createDefaultPipeline(PO, S, *CB);
      Expected<unsigned> C = P->run();
      if (!C) { consumeError(C.takeError()); fprintf(stderr, "pipeline failed\n"); return 1; }
      printf(" %u", *C);
    }
    printf("\n");
  }
  return 0;
}
