// The capq command's subcommands. Each returns the process exit code.
#pragma once

#include <string>
#include <vector>

namespace capq::cli {

using Args = std::vector<std::string>;  // the words after the subcommand name

int RunRows(const Args& args);      // capq rows check [PATHS] | capq rows show ID | rows new
int RunRowsNew(const Args& args);   // capq rows new --url URL --engine E --isl N --osl N ...
int RunSim(const Args& args);       // capq sim --profile FILE ...
int RunTrial(const Args& args);     // capq trial --row FILE --concurrency C --trial K ...
int RunValidate(const Args& args);  // capq validate DIR
int RunQualify(const Args& args);   // capq qualify ROW... ...
int RunReport(const Args& args);    // capq report DIR...
int RunPredict(const Args& args);   // capq predict ROW ...
int RunTraffic(const Args& args);   // capq traffic EXPORT... [--class NAME] [--out FILE]
int RunProbe(const Args& args);     // capq probe URL --engine E --out DIR | capq probe --check DIR
int RunDoctor(const Args& args);    // capq doctor --url URL [--engine E] [--row FILE]

}  // namespace capq::cli
